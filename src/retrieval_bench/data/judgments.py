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

A model judge's file (`python -m run.judge`) is the pool with `"source": "judge"` and the
judge's name (`judge`, `model`, `prompt_sha256` or `thresholds`) on each record, and its raw
answer. Its grades are imported as labels where no person gave one, and the snapshot's `judge`
field records each (`data.evalset`), so people's labels and the judge's stay apart: a person's
label is never changed by a judge; a judge's grade of a passage people labelled is kept beside
their label (`"label": false`), which is what the judge's agreement with people is measured on;
and a person's later judgement replaces a judge's label (the judge's grade stays beside it).
A pair the judge could not grade has a null grade and its reason (`unjudged`): it stays
unlabelled, counted by reason in the summary, never guessed. A second judge grade of a pair
that disagrees with the first (another model, another prompt) is refused, naming file:line.
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

from retrieval_bench.data.evalset import judge_source, load_evalset
from retrieval_bench.data.jsonl import check_fields, read_jsonl
from retrieval_bench.data.passages import load_passages
from retrieval_bench.errors import DataError
from retrieval_bench.io.atomic import current_umask
from retrieval_bench.io.folders import holds_other_content
from retrieval_bench.records import EvalQuery

DEFAULT_GRADES = (0, 1)
# What a model judge adds to each pool record (`run.judge`): its name, its own grade and raw
# answer, what the call cost, and why a pair has no grade.
JUDGE_FIELDS = (
    "source",
    "judge",
    "model",
    "prompt_sha256",
    "thresholds",
    "judge_grade",
    "raw_answer",
    "cost",
    "unjudged",
    "cached",
)
# What a labelling plan adds to each pool record (`run.label plan`): its round and the
# chosen query's inclusion probability (the estimate reads them from the plan, not from here).
PLAN_FIELDS = ("plan_round", "inclusion_probability")
# What a filled pool record may hold (the pool's columns, notes for the annotator, a judge's
# fields, and a plan's).
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
    *JUDGE_FIELDS,
    *PLAN_FIELDS,
)
# `source` of a judge's record (a person's record has none, or "people").
JUDGE_SOURCE = "judge"
PEOPLE_SOURCE = "people"
_HASH_SUFFIX = re.compile(r"\.[0-9a-f]{12}$")


@dataclass(frozen=True)
class Judgement:
    query_id: str
    id: str
    grade: int
    line: int
    # A model judge's name (the snapshot's judge-entry fields but grade and label); None for a
    # person's judgement.
    judge: dict[str, Any] | None = None

    @property
    def source(self) -> str | None:
        if self.judge is None:
            return None
        return judge_source(self.judge["judge"], self.judge["model"], self.judge["prompt_sha256"])


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
    # Of the added labels, how many the judge gave; its grades kept beside people's labels
    # (agreeing, disagreeing); people's judgements that replaced a judge's label.
    added_by_judge: int = 0
    beside_agreeing: int = 0
    beside_disagreeing: int = 0
    replaced_judge: int = 0
    # Pairs the judge could not grade, by reason (they stay unlabelled).
    unjudged: dict[str, int] = field(default_factory=dict)

    def summary(self) -> str:
        lines = [
            f"{self.added_relevant} relevant and {self.added_non_relevant} non-relevant "
            f"judgements added to {self.base}; {self.already_known} already labelled "
            f"(agreeing), {self.blank - sum(self.unjudged.values())} left blank",
        ]
        if self.added_by_judge:
            lines.append(f"  {self.added_by_judge} of the added labels come from the judge")
        if self.beside_agreeing or self.beside_disagreeing:
            lines.append(
                f"  the judge's grade kept beside people's label for "
                f"{self.beside_agreeing + self.beside_disagreeing} pairs "
                f"({self.beside_agreeing} agreeing, {self.beside_disagreeing} not)"
            )
        if self.replaced_judge:
            lines.append(f"  {self.replaced_judge} judge labels replaced by people's judgements")
        if self.unjudged:
            reasons = ", ".join(f"{r} {n}" for r, n in sorted(self.unjudged.items()))
            lines.append(
                f"  {sum(self.unjudged.values())} pairs the judge could not grade stay "
                f"unlabelled ({reasons})"
            )
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


def annotation_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
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
    for line, record in annotation_rows(path):
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
        if (
            query_texts is not None
            and shown is not None
            and str(shown).strip() != (query_texts[qid].strip())
        ):
            raise DataError(
                path,
                f"query {qid!r}: the annotator was shown {shown!r}, but the evaluation set asks "
                f"{query_texts[qid]!r}: judged against another version of the query (pool it "
                "again from jobs run on this evaluation set)",
                line,
            )
        judge = _judge_of(record, path, line)
        grade = _grade(record["grade"], scale, path, line)
        if grade is None:
            blank += 1
            continue
        earlier = seen.get((qid, pid))
        if earlier is None:
            seen[(qid, pid)] = Judgement(qid, pid, grade, line, judge)
        elif earlier.grade != grade:
            raise DataError(
                path,
                f"query {qid!r}, passage {pid!r}: grade {grade} disagrees with grade "
                f"{earlier.grade} on line {earlier.line}",
                line,
            )
    return list(seen.values()), blank


def _judge_of(record: dict[str, Any], path: Path, line: int) -> dict[str, Any] | None:
    """A judge record's name (`judge`, `model`, `prompt_sha256`, `thresholds`); None for a
    person's record."""
    source = record.get("source", PEOPLE_SOURCE)
    if source == PEOPLE_SOURCE:
        return None
    if source != JUDGE_SOURCE:
        raise DataError(
            path, f"source {source!r} is neither {JUDGE_SOURCE!r} nor {PEOPLE_SOURCE!r}", line
        )
    for key in ("judge", "model"):
        if not isinstance(record.get(key), str) or not record[key]:
            raise DataError(path, f"a judge's record needs a non-empty string {key!r}", line)
    prompt, thresholds = record.get("prompt_sha256"), record.get("thresholds")
    if prompt is None and thresholds is None:
        raise DataError(path, "a judge's record needs its 'prompt_sha256' or 'thresholds'", line)
    if prompt is not None and not isinstance(prompt, str):
        raise DataError(path, "'prompt_sha256' must be a string", line)
    if thresholds is not None and (
        not isinstance(thresholds, list)
        or not all(isinstance(t, (int, float)) and not isinstance(t, bool) for t in thresholds)
    ):
        raise DataError(path, "'thresholds' must be a list of numbers", line)
    return {"judge": record["judge"], "model": record["model"], "prompt_sha256": prompt,
            "thresholds": thresholds}  # fmt: skip


def unjudged_reasons(path: Path) -> dict[str, int]:
    """The judge's records without a grade in an annotation file, counted by the kind of their
    `unjudged` reason (the text before its first colon)."""
    out: dict[str, int] = {}
    for _, record in annotation_rows(path):
        reason = record.get("unjudged")
        if reason and record.get("grade") in (None, ""):
            kind = str(reason).split(":", 1)[0].strip() or "unknown"
            out[kind] = out.get(kind, 0) + 1
    return out


def snapshot_name(base: Path, content: bytes) -> Path:
    """`<dir>/<name>.<sha256[:12]>.jsonl` for the evaluation set `base` (a snapshot's own hash
    suffix is replaced, so snapshots of snapshots stay `<name>.<hash>.jsonl`)."""
    stem = _HASH_SUFFIX.sub("", base.stem)
    return base.with_name(f"{stem}.{hashlib.sha256(content).hexdigest()[:12]}.jsonl")


def _set_label(relevant: list[str], relevance: dict[str, int], pid: str, grade: int) -> None:
    """Make `grade` the label of `pid` (relevant_ids for > 0, relevance when not 1)."""
    if pid in relevant:
        relevant.remove(pid)
    relevance.pop(pid, None)
    if grade > 0:
        relevant.append(pid)
    if grade != 1:
        relevance[pid] = grade


def _with_labels(record: dict[str, Any], added: Sequence[Judgement]) -> dict[str, Any]:
    """`record` with `added`: people's labels and the judge's labels join `relevant_ids` /
    `relevance`, each judge grade its `judge` field (module docstring)."""
    out = dict(record)
    relevant = list(out.get("relevant_ids") or [])
    relevance = dict(out.get("relevance") or {})
    judged = {pid: dict(entry) for pid, entry in (out.get("judge") or {}).items()}
    labelled = set(relevant) | set(relevance)
    for j in added:
        if j.judge is None:  # a person's label; replaces a judge's label of the pair
            _set_label(relevant, relevance, j.id, j.grade)
            if j.id in judged:
                judged[j.id]["label"] = False
            continue
        is_label = j.id not in labelled
        if is_label:
            _set_label(relevant, relevance, j.id, j.grade)
        entry = {"grade": j.grade, "label": is_label, "judge": j.judge["judge"]}
        entry["model"] = j.judge["model"]
        for key in ("prompt_sha256", "thresholds"):
            if j.judge.get(key) is not None:
                entry[key] = j.judge[key]
        judged[j.id] = entry
    out["relevant_ids"] = relevant
    if relevance:
        out["relevance"] = relevance
    else:  # a person's relevant label replaced the last graded (e.g. a judge's 0) label
        out.pop("relevance", None)
    if judged:
        out["judge"] = judged
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
    result.unjudged = unjudged_reasons(annotations)
    new: dict[str, list[Judgement]] = {}
    for j in judgements:
        if _is_new(j, queries[j.query_id], evalset, annotations, result):
            new.setdefault(j.query_id, []).append(j)
    for qid, added in new.items():
        labels = [j for j in added if j.judge is None or j.id not in queries[qid].relevance]
        status = queries[qid].label_status
        if status == "unreviewed" and labels:
            result.unreviewed_queries.append(qid)
        if status == "no_answer" and any(j.grade > 0 for j in labels):
            result.no_answer_with_relevant.append(qid)
        result.added_relevant += sum(1 for j in labels if j.grade > 0)
        result.added_non_relevant += sum(1 for j in labels if j.grade <= 0)
        result.added_by_judge += sum(1 for j in labels if j.judge is not None)
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


def _is_new(
    j: Judgement, query: EvalQuery, evalset: Path, annotations: Path, result: ImportResult
) -> bool:
    """Whether `j` changes the snapshot (counted in `result`); a judgement that would change a
    person's label, or a second judge grade that disagrees with the first, is refused."""
    known = query.relevance.get(j.id)
    by_judge = query.judge.get(j.id)
    where = f"query {j.query_id!r}, passage {j.id!r}: grade {j.grade}"
    if j.judge is not None:
        if by_judge is not None:
            if by_judge.grade == j.grade and by_judge.source == j.source:
                result.already_known += 1
                return False
            raise DataError(
                annotations,
                f"{where}, but {evalset} already holds the judge {by_judge.source}'s grade "
                f"{by_judge.grade} for it; a snapshot keeps one judge grade per pair (import "
                "into the evaluation set without it)",
                j.line,
            )
        if known is not None:
            if known == j.grade:
                result.beside_agreeing += 1
            else:
                result.beside_disagreeing += 1
        return True
    if known is None:
        return True
    if by_judge is not None and by_judge.is_label:
        result.replaced_judge += 1
        return True
    if known == j.grade:
        result.already_known += 1
        return False
    raise DataError(
        annotations,
        f"{where}, but {evalset} already labels it {known}; an import adds labels, it does not "
        "change them (edit the evaluation set for that)",
        j.line,
    )


def _write_new(target: Path, content: bytes) -> bool:
    """Write `target` whole and only if it is not there; True when it already held `content`.
    The content is checked as an evaluation set before it takes the name."""
    if holds_other_content(target, content):
        raise DataError(target, "exists with other content; a snapshot is never overwritten")
    if target.exists():
        return True
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
