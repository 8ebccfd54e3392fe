"""Reader of native evaluation sets (`evalsets/<name>.jsonl`).

It checks every field up front, naming the file and line of the first bad record: the required
ones (id, query, type, label status, relevant ids) and, when present, the optional ones of the
contract in ARCHITECTURE.md (entities, cities, user role, hops, reference answer, notes), which the
router and the permission filter read. Any other field is refused, with the nearest known name
(a misspelt `expected_entites` would silently drop its labels); `meta` is free-form and not
read. It does not check labels against a corpus:
`scoring.labels.judge` does that when a corpus is at hand.

Labels: `relevant_ids` gives grade 1 to each id; an optional `relevance: {id: grade}` adds graded
labels (grade 0 = judged non-relevant) and overrides the grade of ids also in `relevant_ids`,
which must then stay > 0.

A label snapshot with a model judge's grades (`python -m run.pool --import` of `run.judge`'s
output) says which labels came from the judge: `judge: {id: {"grade", "label", "judge",
"model", "prompt_sha256"?, "thresholds"?}}`. With `"label": true` the grade is the passage's
label (no person gave one) and must equal its grade in `relevance`; with `false` a person's
label stands and the judge's grade is kept beside it (the judge's agreement with people, and
the prediction-powered estimates, read it).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from retrieval_bench.data.jsonl import (
    FREE_FORM,
    check_fields,
    check_trec_id,
    optional_str_list,
    read_jsonl,
    require_str,
)
from retrieval_bench.errors import DataError
from retrieval_bench.records import LABEL_STATUSES, EvalQuery, JudgeGrade

_REQUIRED = ("query_id", "query", "query_type", "label_status", "relevant_ids")
_OPTIONAL = (
    "relevance",
    "expected_entities",
    "negative_entities",
    "expected_cities",
    "user_role",
    "hops",
    "reference_answer",
    "judge",
)
FIELDS = (*_REQUIRED, *_OPTIONAL, *FREE_FORM)
# One judge grade of a snapshot's `judge` field.
JUDGE_ENTRY_FIELDS = ("grade", "label", "judge", "model", "prompt_sha256", "thresholds")


def judge_source(kind: str, model: str, prompt_sha256: str | None) -> str:
    """How a judge is named wherever its grades are counted: `<kind>:<model>[:<prompt 12>]`."""
    return f"{kind}:{model}" + (f":{prompt_sha256[:12]}" if prompt_sha256 else "")


def load_evalset(path: str | os.PathLike[str]) -> list[EvalQuery]:
    """Read every record; blank lines are skipped, anything else malformed is a DataError."""
    path = Path(path)
    queries: list[EvalQuery] = []
    first_line: dict[str, int] = {}
    for number, record in read_jsonl(path):
        query = _parse(path, number, record)
        if query.query_id in first_line:
            raise DataError(
                path,
                f"duplicate query_id {query.query_id!r} "
                f"(first on line {first_line[query.query_id]})",
                number,
            )
        first_line[query.query_id] = number
        queries.append(query)
    return queries


def _parse(path: Path, number: int, record: dict[str, Any]) -> EvalQuery:
    def fail(message: str) -> DataError:
        return DataError(path, message, number)

    check_fields(record, FIELDS, path, number)
    for key in _REQUIRED:
        if key not in record:
            raise fail(f"missing field {key!r}")
    for key in ("query_id", "query", "query_type"):
        require_str(record, key, path, number)
    check_trec_id(record["query_id"], "query_id", path, number)
    if record["label_status"] not in LABEL_STATUSES:
        raise fail(f"label_status {record['label_status']!r} is not one of {LABEL_STATUSES}")

    relevant = record["relevant_ids"]
    if not isinstance(relevant, list) or not all(isinstance(x, str) and x for x in relevant):
        raise fail("field 'relevant_ids' must be a list of non-empty strings")
    relevance: dict[str, int] = {}
    for pid in relevant:
        if pid in relevance:
            raise fail(f"relevant_ids lists {pid!r} twice")
        relevance[pid] = 1
    graded = record.get("relevance", {})
    if not isinstance(graded, dict):
        raise fail("field 'relevance' must be an object {id: grade}")
    for pid, grade in graded.items():
        if not pid:
            raise fail("field 'relevance' has an empty id")
        if isinstance(grade, bool) or not isinstance(grade, int):
            raise fail(f"relevance grade of {pid!r} must be an integer, got {grade!r}")
        if pid in relevance and grade <= 0:
            raise fail(f"{pid!r} is in relevant_ids but has relevance grade {grade}")
        relevance[pid] = grade

    judge = _judge_grades(record.get("judge", {}), relevance, fail)

    def optional_text(key: str) -> str | None:
        value = record.get(key)
        if value is not None and not isinstance(value, str):
            raise fail(f"field {key!r} must be a string")
        return value

    hops = record.get("hops")
    if hops is None:
        hops = []
    if not isinstance(hops, list) or not all(
        isinstance(hop, list) and all(isinstance(x, str) for x in hop) for hop in hops
    ):
        raise fail("field 'hops' must be a list of lists of ids")

    return EvalQuery(
        query_id=record["query_id"],
        query=record["query"],
        query_type=record["query_type"],
        label_status=record["label_status"],
        relevance=relevance,
        expected_entities=optional_str_list(record, "expected_entities", path, number),
        negative_entities=optional_str_list(record, "negative_entities", path, number),
        expected_cities=optional_str_list(record, "expected_cities", path, number),
        user_role=optional_text("user_role"),
        hops=tuple(tuple(hop) for hop in hops),
        reference_answer=optional_text("reference_answer"),
        notes=optional_text("notes"),
        judge=judge,
        meta=dict(record["meta"]) if isinstance(record.get("meta"), dict) else {},
    )


def _judge_grades(
    value: Any, relevance: dict[str, int], fail: Callable[[str], DataError]
) -> dict[str, JudgeGrade]:
    """The `judge` field, checked (module docstring)."""
    if not isinstance(value, dict):
        raise fail("field 'judge' must be an object {id: judge grade}")
    out: dict[str, JudgeGrade] = {}
    for pid, entry in value.items():
        where = f"judge grade of {pid!r}"
        if not isinstance(entry, dict):
            raise fail(f"{where} must be an object with {', '.join(JUDGE_ENTRY_FIELDS[:4])}")
        unknown = sorted(set(entry) - set(JUDGE_ENTRY_FIELDS))
        if unknown:
            raise fail(f"{where}: unknown field {unknown[0]!r} (known: {JUDGE_ENTRY_FIELDS})")
        grade, label = entry.get("grade"), entry.get("label")
        if isinstance(grade, bool) or not isinstance(grade, int):
            raise fail(f"{where}: 'grade' must be an integer, got {grade!r}")
        if not isinstance(label, bool):
            raise fail(f"{where}: 'label' must be true or false, got {label!r}")
        for key in ("judge", "model"):
            if not isinstance(entry.get(key), str) or not entry[key]:
                raise fail(f"{where}: '{key}' must be a non-empty string")
        prompt = entry.get("prompt_sha256")
        if prompt is not None and not isinstance(prompt, str):
            raise fail(f"{where}: 'prompt_sha256' must be a string")
        if label and relevance.get(pid) != grade:
            raise fail(
                f'{where} is its label ("label": true), but its label in relevance is '
                f"{relevance.get(pid)!r}, not {grade}"
            )
        out[pid] = JudgeGrade(grade, label, judge_source(entry["judge"], entry["model"], prompt))
    return out


def evalset_record(query: EvalQuery) -> dict[str, Any]:
    """One query as a native evaluation-set record, the inverse of what `load_evalset` reads
    (grade-1 labels as `relevant_ids`, any other grade under `relevance`; empty optional fields
    left out), so a set built in code (a perturbed set) loads back as the same queries."""
    record: dict[str, Any] = {
        "query_id": query.query_id,
        "query": query.query,
        "query_type": query.query_type,
        "label_status": query.label_status,
        "relevant_ids": [pid for pid, grade in query.relevance.items() if grade > 0],
    }
    graded = {pid: grade for pid, grade in query.relevance.items() if grade != 1}
    if graded:
        record["relevance"] = graded
    for key in ("expected_entities", "negative_entities", "expected_cities"):
        if getattr(query, key):
            record[key] = list(getattr(query, key))
    if query.user_role is not None:
        record["user_role"] = query.user_role
    if query.hops:
        record["hops"] = [list(hop) for hop in query.hops]
    if query.reference_answer is not None:
        record["reference_answer"] = query.reference_answer
    if query.notes is not None:
        record["notes"] = query.notes
    if query.meta:
        record["meta"] = query.meta
    return record
