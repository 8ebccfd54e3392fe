"""Content hashes a job records (manifest.json) so its rankings can be re-scored later.

- `labels_hash`: what scoring reads of the evaluation set, as parsed: each query's id, type,
  label status, graded relevance (grade 0 judgements included), entities, cities, user role,
  hops and text (`query_length` groups read it), and the queries the labels leave unjudged
  with their reason, and a model judge's grades with which of them are labels (a snapshot's
  `judge` field). Canonical JSON, so key order, spacing and free-form fields (`notes`,
  `meta`) do not change it; a label snapshot with any other judgement does.
- `queries_hash`: what retrieval reads of the queries (which are run, their text, their user
  role): stored rankings are only valid for the same queries.
- `corpus_hash`: the corpus files the job read (passages and lexicon, or BEIR's corpus.jsonl),
  from their file hashes; a job's rankings belong to its corpus.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from retrieval_bench.records import Dataset, EvalQuery

# The files of each dataset format that retrieval reads besides the queries.
CORPUS_FILES = {"native": ("passages.jsonl", "lexicon.jsonl"), "beir": ("corpus.jsonl",)}


def canonical_sha256(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _scored_fields(query: EvalQuery) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "query_id": query.query_id,
        "query": query.query,
        "query_type": query.query_type,
        "label_status": query.label_status,
        "relevance": query.relevance,
        "expected_entities": list(query.expected_entities),
        "negative_entities": list(query.negative_entities),
        "expected_cities": list(query.expected_cities),
        "user_role": query.user_role,
        "hops": [list(hop) for hop in query.hops],
    }
    if query.judge:  # only when present, so sets without a judge keep their hashes
        fields["judge"] = {
            pid: [g.grade, g.is_label, g.source] for pid, g in sorted(query.judge.items())
        }
    return fields


def labels_hash(dataset: Dataset) -> str:
    judged = sorted((_scored_fields(q) for q in dataset.queries), key=lambda q: q["query_id"])
    unjudged = sorted([u.query_id, u.query_type, u.reason] for u in dataset.unjudged)
    return canonical_sha256({"queries": judged, "unjudged": unjudged})


def queries_hash(dataset: Dataset) -> str:
    return canonical_sha256(sorted([q.query_id, q.query, q.user_role] for q in dataset.queries))


def corpus_hash(files_sha256: Mapping[str, str], fmt: str) -> str:
    """From a job's `dataset.files_sha256`, so it can be derived for any recorded job."""
    names = CORPUS_FILES.get(fmt, CORPUS_FILES["native"])
    return canonical_sha256({name: files_sha256[name] for name in names if name in files_sha256})


def hash_record(dataset: Dataset, fmt: str) -> dict[str, Any]:
    """The manifest's `labels`, `queries` and `corpus` entries of a job on `dataset`."""
    return {
        "labels": {"hash": labels_hash(dataset)},
        "queries": {"hash": queries_hash(dataset)},
        "corpus": {"hash": corpus_hash(dataset.hashes, fmt)},
    }


def short(digest: str | None) -> str:
    """A hash as messages print it (12 hex digits, as git's short ids)."""
    return digest[:12] if digest else "(none recorded)"
