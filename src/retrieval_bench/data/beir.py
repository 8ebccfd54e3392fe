"""BEIR folders as they are: corpus.jsonl, queries.jsonl, qrels/<split>.tsv (score > 0 relevant).

Records hold BEIR's fields only (`metadata` is free-form); any other field is refused with the
nearest known name. A query the split's qrels do not judge is not run but counted, as
`other_split` when another qrels file of the folder judges it, else as `no_qrels`.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from retrieval_bench.data.jsonl import check_fields, file_sha256, read_jsonl_with_ids, require_str
from retrieval_bench.errors import DataError
from retrieval_bench.records import (
    NO_QRELS,
    OTHER_SPLIT,
    Dataset,
    EvalQuery,
    Passage,
    UnjudgedQuery,
)

CORPUS_FIELDS = ("_id", "title", "text", "metadata")
QUERY_FIELDS = ("_id", "text", "metadata")


def load_beir(root: Path, split: str = "test", name: str | None = None) -> Dataset:
    corpus_path, queries_path = root / "corpus.jsonl", root / "queries.jsonl"
    qrels_path = root / "qrels" / f"{split}.tsv"
    passages: list[Passage] = []
    for line, pid, record in read_jsonl_with_ids(corpus_path, "_id", "passage id"):
        check_fields(record, CORPUS_FIELDS, corpus_path, line)
        text = record.get("text")
        if not isinstance(text, str):
            raise DataError(corpus_path, "field 'text' must be a string", line)
        title = record.get("title") or ""
        meta = record.get("metadata") or {}
        passages.append(Passage(id=pid, text=text, title=str(title), meta=dict(meta)))
    if not passages:
        raise DataError(corpus_path, "the corpus is empty: no passages")

    qrels = _read_qrels(qrels_path)
    queries: list[EvalQuery] = []
    unjudged: list[UnjudgedQuery] = []
    other_splits: set[str] | None = None
    query_ids: set[str] = set()
    for line, qid, record in read_jsonl_with_ids(queries_path, "_id", "query id"):
        check_fields(record, QUERY_FIELDS, queries_path, line)
        query_ids.add(qid)
        text = require_str(record, "text", queries_path, line)
        query_type = _query_type(record)
        if qid not in qrels:
            if other_splits is None:
                other_splits = _judged_elsewhere(qrels_path)
            reason = OTHER_SPLIT if qid in other_splits else NO_QRELS
            unjudged.append(UnjudgedQuery(qid, query_type, reason))
            continue
        queries.append(
            EvalQuery(
                query_id=qid,
                query=text,
                query_type=query_type,
                label_status="reviewed",
                relevance=qrels[qid],
            )
        )
    missing = sorted(set(qrels) - query_ids)
    if missing:
        raise DataError(
            qrels_path,
            f"{len(missing)} judged queries are not in {queries_path.name}, e.g. {missing[:3]}",
        )
    if not queries:
        raise DataError(qrels_path, f"no query of {queries_path.name} is judged in this split")
    hashes = {p.name: file_sha256(p) for p in (corpus_path, queries_path, qrels_path)}
    return Dataset(
        name=name or root.name,
        passages=tuple(passages),
        queries=tuple(queries),
        unjudged=tuple(unjudged),
        hashes=hashes,
    )


def _query_type(record: dict[str, Any]) -> str:
    metadata = record.get("metadata") or {}
    query_type = metadata.get("query_type") if isinstance(metadata, dict) else None
    return str(query_type or "unknown")


def _judged_elsewhere(qrels_path: Path) -> set[str]:
    """Query ids judged by the folder's other qrels files (other splits); read only for their
    first column, so a fault in a split this job does not use cannot stop it."""
    judged: set[str] = set()
    for other in sorted(qrels_path.parent.glob("*.tsv")):
        if other == qrels_path:
            continue
        with other.open(encoding="utf-8", errors="replace", newline="") as handle:
            judged.update(row[0] for row in csv.reader(handle, delimiter="\t") if row)
    return judged


def _read_qrels(path: Path) -> dict[str, dict[str, int]]:
    if not path.is_file():
        raise DataError(path, "qrels file not found")
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8", newline="") as handle:
        for line, row in enumerate(csv.reader(handle, delimiter="\t"), start=1):
            if not row or (line == 1 and row[0] == "query-id"):
                continue
            if len(row) != 3:
                raise DataError(path, f"expected 3 tab-separated fields, got {len(row)}", line)
            qid, pid, score = row
            try:
                grade = int(score)
            except ValueError:
                raise DataError(path, f"score {score!r} is not an integer", line) from None
            if pid in qrels.setdefault(qid, {}):
                raise DataError(path, f"duplicate judgement for ({qid}, {pid})", line)
            qrels[qid][pid] = grade
    return qrels
