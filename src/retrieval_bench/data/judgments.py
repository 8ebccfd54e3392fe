"""Import annotators' judgements as a new label snapshot of a native evaluation set.

An annotation file is the filled pool (`labels_pool`): JSONL records, or the CSV, each with
`query_id`, `id` (a passage id) and `grade`, an integer on the configured scale (default 0/1;
> 0 relevant, 0 judged non-relevant); a blank grade (null, or an empty CSV cell) is a passage
not judged yet and is skipped. The pool's other columns may stay. Refused, naming file:line:
an unknown field, query or passage, a grade off the scale, a judgement that disagrees with an
earlier one in the file (an agreeing repeat is fine; grades 1 and 2 disagree) or with a label
the evaluation set already holds (an import adds labels; changing one is an edit of the
evaluation set), and a row whose `query` text is not the evaluation set's (the annotator judged
another version of the question).

The snapshot is the evaluation set with the new labels added, written beside it as
`<name>.<first 12 hex digits of its sha256>.jsonl`: the file is never overwritten (the same
labels give the same name), the old set stays, and a job's manifest (`files_sha256`) names the
snapshot it was scored against. A grade > 0 joins the query's `relevant_ids` (and `relevance`
when it is not 1); a grade 0 goes to `relevance` as judged non-relevant, which `judged@K` and
the `*_condensed@K` metrics count as judged. Untouched records keep their exact bytes.

A query's `label_status` is never changed: judgements of `unreviewed` or `no_answer` queries
are kept, and the scorer keeps excluding those queries until a person changes their status
(a `no_answer` query judged to have a relevant passage is named in the summary for that).
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrieval_bench.data.evalset import load_evalset
from retrieval_bench.data.jsonl import check_fields, read_jsonl
from retrieval_bench.data.passages import load_passages
from retrieval_bench.errors import DataError
from retrieval_bench.io import current_umask

DEFAULT_GRADES = (0, 1)
# What a filled pool record may hold (the pool's columns, plus notes for the annotator).
ANNOTATION_FIELDS = (
    "query_id",
    "id",
    "grade",
    "query",
    "query_type",
    "label_status",
    "title",
    "text",
    "best_rank",
    "retrieved_by",
    "notes",
)
_HASH_SUFFIX = re.compile(r"\.[0-9a-f]{12}$")


@dataclass(frozen=True)
class Judgement:
    query_id: str
    id: str
    grade: int
    line: int


@dataclass
class ImportResult:
    """What an import did: the snapshot (None when nothing was new) and its counts."""

    snapshot: Path | None
    base: Path
    added_relevant: int = 0
    added_non_relevant: int = 0
    already_known: int = 0
    blank: int = 0
    existed: bool = False
    unreviewed_queries: list[str] = field(default_factory=list)
    no_answer_with_relevant: list[str] = field(default_factory=list)

    def summary(self) -> str:
        lines = [
            f"{self.added_relevant} relevant and {self.added_non_relevant} non-relevant "
            f"judgements added to {self.base}; {self.already_known} already labelled "
            f"(agreeing), {self.blank} left blank",
        ]
        if self.snapshot is None:
            lines.append("nothing new: no snapshot written")
        else:
            state = "already there, same labels" if self.existed else "written"
            lines.append(f"snapshot {self.snapshot} ({state}); use it with")
            lines.append(f"  python -m run dataset.evalset={self.snapshot}")
        if self.unreviewed_queries:
            lines.append(
                f"judged {len(self.unreviewed_queries)} unreviewed queries (still excluded "
                f"until reviewed): {', '.join(self.unreviewed_queries)}"
            )
        if self.no_answer_with_relevant:
            lines.append(
                "no_answer queries judged to have a relevant passage (review their "
                f"label_status): {', '.join(self.no_answer_with_relevant)}"
            )
        return "\n".join(lines)


def parse_grades(text: str) -> tuple[int, ...]:
    """`0,1,2` -> (0, 1, 2): the grades an annotator may give."""
    try:
        grades = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    except ValueError:
        raise ValueError(f"grades must be comma-separated integers, got {text!r}") from None
    if not grades or not any(g > 0 for g in grades) or min(grades) < 0:
        raise ValueError(f"grades need 0 or more and one > 0 (relevant), got {text!r}")
    return grades


def _annotation_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line, record) of a JSONL or CSV annotation file; a CSV grade is still text here."""
    if path.suffix.lower() != ".csv":
        yield from read_jsonl(path)
        return
    if not path.is_file():
        raise DataError(path, "file not found")
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        for row in reader:
            if None in row:
                raise DataError(path, "more cells than header columns", reader.line_num)
            yield reader.line_num, dict(row)


def _grade(value: Any, scale: Sequence[int], path: Path, line: int) -> int | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise DataError(path, f"grade {value!r} is not an integer", line) from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise DataError(path, f"grade {value!r} is not an integer", line)
    if value not in scale:
        allowed = ", ".join(map(str, scale))
        raise DataError(path, f"grade {value} is outside the scale {allowed} (--grades)", line)
    return value


def read_judgements(
    path: Path,
    query_ids: Collection[str],
    passage_ids: Collection[str],
    scale: Sequence[int],
    query_texts: Mapping[str, str] | None = None,
) -> tuple[list[Judgement], int]:
    """Every judgement of an annotation file, checked (module docstring), in file order with
    agreeing repeats dropped; and the number of blank grades. With `query_texts` (query id ->
    its text in the evaluation set), a row whose `query` is another text is refused: it was
    judged against another version of the question."""
    seen: dict[tuple[str, str], Judgement] = {}
    blank = 0
    for line, record in _annotation_rows(path):
        check_fields(record, ANNOTATION_FIELDS, path, line)
        for key in ("query_id", "id", "grade"):
            if key not in record:
                raise DataError(path, f"missing field {key!r}", line)
        qid, pid = record["query_id"], record["id"]
        if not isinstance(qid, str) or qid not in query_ids:
            raise DataError(path, f"unknown query_id {qid!r} (not in the evaluation set)", line)
        if not isinstance(pid, str) or pid not in passage_ids:
            raise DataError(path, f"unknown passage id {pid!r} (not in the corpus)", line)
        shown = record.get("query")
        if query_texts is not None and shown is not None and str(shown).strip() != (
            query_texts[qid].strip()
        ):
            raise DataError(
                path,
                f"query {qid!r}: the annotator was shown {shown!r}, but the evaluation set asks "
                f"{query_texts[qid]!r}: judged against another version of the query (pool it "
                "again from jobs run on this evaluation set)",
                line,
            )
        grade = _grade(record["grade"], scale, path, line)
        if grade is None:
            blank += 1
            continue
        earlier = seen.get((qid, pid))
        if earlier is None:
            seen[(qid, pid)] = Judgement(qid, pid, grade, line)
        elif earlier.grade != grade:
            raise DataError(
                path,
                f"query {qid!r}, passage {pid!r}: grade {grade} disagrees with grade "
                f"{earlier.grade} on line {earlier.line}",
                line,
            )
    return list(seen.values()), blank


def snapshot_name(base: Path, content: bytes) -> Path:
    """`<dir>/<name>.<sha256[:12]>.jsonl` for the evaluation set `base` (a snapshot's own hash
    suffix is replaced, so snapshots of snapshots stay `<name>.<hash>.jsonl`)."""
    stem = _HASH_SUFFIX.sub("", base.stem)
    return base.with_name(f"{stem}.{hashlib.sha256(content).hexdigest()[:12]}.jsonl")


def _with_labels(record: dict[str, Any], added: Sequence[Judgement]) -> dict[str, Any]:
    out = dict(record)
    relevant = list(out.get("relevant_ids") or [])
    relevance = dict(out.get("relevance") or {})
    for j in added:
        if j.grade > 0:
            relevant.append(j.id)
        if j.grade != 1:
            relevance[j.id] = j.grade
    out["relevant_ids"] = relevant
    if relevance:
        out["relevance"] = relevance
    return out


def import_judgements(
    annotations: Path,
    evalset: Path,
    passage_ids: Collection[str],
    scale: Sequence[int] = DEFAULT_GRADES,
    out: Path | None = None,
) -> ImportResult:
    """Check `annotations` against `evalset` and the corpus' `passage_ids`, and write the
    evaluation set with the new labels as a snapshot (module docstring); `out` names the
    snapshot file instead (refused if it exists with other content)."""
    queries = {q.query_id: q for q in load_evalset(evalset)}
    texts = {qid: q.query for qid, q in queries.items()}
    judgements, blank = read_judgements(annotations, queries, passage_ids, scale, texts)
    result = ImportResult(snapshot=None, base=evalset, blank=blank)
    new: dict[str, list[Judgement]] = {}
    for j in judgements:
        known = queries[j.query_id].relevance.get(j.id)
        if known is None:
            new.setdefault(j.query_id, []).append(j)
        elif known == j.grade:
            result.already_known += 1
        else:
            raise DataError(
                annotations,
                f"query {j.query_id!r}, passage {j.id!r}: grade {j.grade}, but {evalset} "
                f"already labels it {known}; an import adds labels, it does not change them "
                "(edit the evaluation set for that)",
                j.line,
            )
    for qid, added in new.items():
        status = queries[qid].label_status
        if status == "unreviewed":
            result.unreviewed_queries.append(qid)
        if status == "no_answer" and any(j.grade > 0 for j in added):
            result.no_answer_with_relevant.append(qid)
        result.added_relevant += sum(1 for j in added if j.grade > 0)
        result.added_non_relevant += sum(1 for j in added if j.grade <= 0)
    if not new:
        return result
    lines = evalset.read_text(encoding="utf-8").splitlines(keepends=True)
    for number, record in read_jsonl(evalset):
        if record["query_id"] in new:
            changed = _with_labels(record, new[record["query_id"]])
            lines[number - 1] = json.dumps(changed, ensure_ascii=False) + "\n"
    content = "".join(lines).encode("utf-8")
    target = out or snapshot_name(evalset, content)
    result.snapshot = target
    result.existed = _write_new(target, content)
    return result


def _write_new(target: Path, content: bytes) -> bool:
    """Write `target` whole and only if it is not there; True when it already held `content`.
    The content is checked as an evaluation set before it takes the name."""
    if target.exists():
        if target.read_bytes() == content:
            return True
        raise DataError(target, "exists with other content; a snapshot is never overwritten")
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), 0o666 & ~current_umask())  # what open() would give
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        load_evalset(Path(tmp))
        os.link(tmp, target)  # fails if the name was taken meanwhile: never overwrites
    finally:
        Path(tmp).unlink(missing_ok=True)
    return False


def corpus_ids(passages: Path) -> set[str]:
    """The passage ids of a corpus folder's passages.jsonl (or of the file itself)."""
    path = passages / "passages.jsonl" if passages.is_dir() else passages
    return {p.id for p in load_passages(path)}
