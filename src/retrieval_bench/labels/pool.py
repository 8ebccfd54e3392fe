"""Judgment pools: the unlabelled passages that finished jobs ranked high, ready for annotators.

Labels are usually collected from one system's results, so a system that finds relevant but
unlabelled passages is scored as worse (its `judged@K` is low and its `*_condensed@K` metrics
rise above the plain ones). A pool is the cure: for every query of the evaluation set, each
passage in the top `depth` of any job's recorded stage (every stage of `rankings.jsonl`, router
baselines included) that carries no label -- neither relevant nor judged non-relevant -- once,
with the query, the passage text and which job:stage ranked it where. Annotators fill its
`grade`; `data.judgments` imports the filled file as a new label snapshot.

Queries that are `unreviewed` or `no_answer` are pooled too, marked by their `label_status`:
an annotator can review them, and their judgements are kept, although the scorer keeps
excluding them until a person changes their status.

A pool is built from one dataset's jobs, against one evaluation set (by default the file the
jobs were configured with, as it is now): ranked ids are read back from each job's
`rankings.jsonl`, and passage texts from its corpus, which must still be the corpus the job
ranked (content hash in `manifest.json`), or the ids could name other texts.
"""

from __future__ import annotations

import csv
import io
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrieval_bench.data.evalset import load_evalset
from retrieval_bench.data.jsonl import file_sha256
from retrieval_bench.data.passages import load_passages
from retrieval_bench.errors import BenchError
from retrieval_bench.io.atomic import atomic_write_text
from retrieval_bench.io.folders import holds_other_content
from retrieval_bench.io.strict_json import jsonl_text
from retrieval_bench.jobdir import names
from retrieval_bench.jobdir.files import read_rankings
from retrieval_bench.jobdir.job_sets import assign_labels, group_by_dataset
from retrieval_bench.jobdir.read import FinishedJob, load_jobs
from retrieval_bench.paths import resolve_path
from retrieval_bench.records import EvalQuery, Passage

log = logging.getLogger(__name__)

# The fields of a pool record, in file order; `grade` is null until an annotator fills it.
POOL_FIELDS = (
    "query_id",
    "query",
    "query_type",
    "label_status",
    "id",
    "title",
    "text",
    "best_rank",
    "retrieved_by",
    "grade",
)


class PoolError(BenchError):
    """The jobs cannot be pooled together, or the pool would overwrite an annotator's file."""


@dataclass
class Pool:
    """A pool's records (one per query and unlabelled passage, `POOL_FIELDS`) and where from."""

    records: list[dict[str, Any]]
    depth: int
    evalset: Path
    jobs: list[str]
    sources: int
    # Queries ranked by the jobs that the evaluation set does not hold (not pooled).
    unknown_queries: list[str] = field(default_factory=list)

    def summary(self) -> str:
        queries = len({r["query_id"] for r in self.records})
        marked = sum(1 for r in self.records if r["label_status"] != "reviewed")
        lines = [
            f"pool at depth {self.depth}: {len(self.records)} unlabelled passages for {queries} "
            f"queries, from {self.sources} rankings of {len(self.jobs)} jobs; labels: "
            f"{self.evalset}",
        ]
        if marked:
            lines.append(f"  {marked} of them for unreviewed or no_answer queries (marked)")
        if self.unknown_queries:
            lines.append(
                f"  not pooled: {len(self.unknown_queries)} ranked queries the evaluation set "
                f"does not hold, e.g. {', '.join(self.unknown_queries[:3])}"
            )
        return "\n".join(lines)


def _dataset_paths(job: FinishedJob) -> tuple[Path, Path]:
    """(passages.jsonl, evaluation set) of a native-format job, from its recorded config."""
    dataset = job.config.get("dataset") or {}
    if dataset.get("format", "native") != "native":
        raise PoolError(
            f"{job.path}: dataset format {dataset.get('format')!r}; pools are built for native "
            "evaluation sets (evalsets/<name>.jsonl)"
        )
    if not dataset.get("corpus") or not dataset.get("evalset"):
        raise PoolError(f"{job.path / names.MANIFEST}: config names no dataset corpus/evalset")
    corpus = resolve_path(str(dataset["corpus"])) / "passages.jsonl"
    return corpus, resolve_path(str(dataset["evalset"]))


def _check_corpus(job: FinishedJob, passages: Path, current: str) -> None:
    """The corpus must be the one the job ranked, or its ids could name other texts."""
    recorded = ((job.manifest.get("dataset") or {}).get("files_sha256") or {}).get(passages.name)
    if recorded is None:
        raise PoolError(f"{job.path / names.MANIFEST}: records no hash of {passages.name}")
    if recorded != current:
        raise PoolError(
            f"job {job.path}: its corpus changed since it ran ({passages}: sha256 {recorded} "
            f"when the job ran, {current} now); pool jobs run on the current corpus"
        )


def _rankings(job: FinishedJob) -> dict[str, dict[str, list[str]]]:
    """query id -> {"<stage>" or "baselines.<name>": ranked ids} from the job's rankings.jsonl."""
    return {
        record.query.query_id: {
            **{name: stage.ids for name, stage in record.stages.items()},
            **{f"baselines.{name}": stage.ids for name, stage in record.baselines.items()},
        }
        for record in read_rankings(job.path)
    }


def build_pool(
    jobs: Sequence[FinishedJob],
    depth: int,
    queries: Sequence[EvalQuery],
    passages: Mapping[str, Passage],
) -> Pool:
    """The pool of `jobs` (labelled, see `jobdir.job_sets.assign_labels`) against `queries`.

    Order: evaluation-set order of queries; within a query, best rank first, then the passages
    more rankings found, then id."""
    if depth <= 0:
        raise PoolError(f"--depth must be a positive integer, got {depth}")
    known = {q.query_id: q for q in queries}
    # query id -> passage id -> {source: 1-based rank}
    found: dict[str, dict[str, dict[str, int]]] = {}
    unknown: dict[str, None] = {}
    sources = 0
    for job in jobs:
        for qid, stages in _rankings(job).items():
            query = known.get(qid)
            if query is None:
                unknown.setdefault(qid, None)
                continue
            for stage, ids in stages.items():
                sources += 1
                source = f"{job.label}:{stage}"
                for rank, pid in enumerate(ids[:depth], start=1):
                    if pid in query.relevance:
                        continue
                    if pid not in passages:
                        raise PoolError(
                            f"{job.path / names.RANKINGS}: query {qid!r}, {stage}: passage "
                            f"{pid!r} is not in the corpus"
                        )
                    by_source = found.setdefault(qid, {}).setdefault(pid, {})
                    by_source.setdefault(source, rank)
    records: list[dict[str, Any]] = []
    for query in queries:
        pooled = found.get(query.query_id, {})
        records += pool_records(query, pooled, passages)
    return Pool(records, depth, Path(), [j.label for j in jobs], sources, list(unknown))


def corpus_of(jobs: Sequence[FinishedJob], where: str = "the jobs") -> tuple[Path, Path]:
    """(passages.jsonl, the evaluation set configured) of native-format jobs that ranked one
    corpus, still the one they ranked (its hash as each job's manifest recorded it)."""
    paths = {_dataset_paths(job) for job in jobs}
    if len(paths) > 1:
        listed = "; ".join(f"{c.parent} + {e}" for c, e in sorted(paths))
        raise PoolError(f"{where}: the jobs ranked different corpora or evaluation sets: {listed}")
    passages_path, configured = paths.pop()
    current = file_sha256(passages_path) if passages_path.is_file() else "(missing)"
    for job in jobs:
        _check_corpus(job, passages_path, current)
    return passages_path, configured


def pool_records(
    query: EvalQuery, found: Mapping[str, Mapping[str, int]], passages: Mapping[str, Passage]
) -> list[dict[str, Any]]:
    """The pool records (`POOL_FIELDS`, grade null) of one query's passages `found` (passage
    id -> {source: 1-based rank}): best rank first, then the passages more rankings found,
    then id."""
    order = sorted(found, key=lambda p: (min(found[p].values()), -len(found[p]), p))
    return [
        {
            "query_id": query.query_id,
            "query": query.query,
            "query_type": query.query_type,
            "label_status": query.label_status,
            "id": pid,
            "title": passages[pid].title,
            "text": passages[pid].text,
            "best_rank": min(found[pid].values()),
            "retrieved_by": dict(found[pid]),
            "grade": None,
        }
        for pid in order
    ]


def pool_folders(root: Path, depth: int, evalset: Path | None = None) -> Pool:
    """Pool every finished job at or below `root` (a sweep, any folder above job folders, or
    one job folder), against `evalset` (default: the one the jobs were configured with)."""
    jobs = load_jobs([root])
    if not jobs:
        raise PoolError(f"{root}: holds no finished job")
    datasets = group_by_dataset(jobs)
    if len(datasets) > 1:
        raise PoolError(
            f"{root}: jobs of {len(datasets)} datasets ({', '.join(sorted(datasets))}); "
            "pool one dataset at a time (pass a folder holding one dataset's jobs)"
        )
    passages_path, configured = corpus_of(jobs, str(root))
    labels = evalset or configured
    queries = load_evalset(labels)
    passages = {p.id: p for p in load_passages(passages_path)}
    assign_labels(jobs)
    pool = build_pool(jobs, depth, queries, passages)
    pool.evalset = labels
    return pool


def pool_csv(records: Sequence[Mapping[str, Any]], fields: Sequence[str] = POOL_FIELDS) -> str:
    """The pool as CSV (the columns of `fields`, by default `POOL_FIELDS`; `retrieved_by` as
    `source@rank; ...`, `grade` empty), for annotators who prefer a spreadsheet; it imports like
    the JSONL."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(fields)
    for record in records:
        row = dict(record)
        row["retrieved_by"] = "; ".join(f"{s}@{r}" for s, r in record["retrieved_by"].items())
        row["grade"] = "" if record["grade"] is None else record["grade"]
        writer.writerow([row[name] for name in fields])
    return buffer.getvalue()


def write_pool(pool: Pool, out_dir: Path) -> list[Path]:
    """`pool.jsonl` and `pool.csv` in `out_dir`, each written whole. A pool file that exists
    with other content is refused, not replaced: an annotator may be filling it."""
    return write_pool_records(pool.records, out_dir)


def write_pool_records(
    records: list[dict[str, Any]], out_dir: Path, fields: Sequence[str] = POOL_FIELDS
) -> list[Path]:
    """`write_pool` of any pool records (a labelling plan's carry more `fields`)."""
    texts = {
        names.POOL_JSONL: jsonl_text(records),
        names.POOL_CSV: pool_csv(records, fields),
    }
    for name, text in texts.items():
        path = out_dir / name
        if holds_other_content(path, text):
            raise PoolError(
                f"{path}: exists with other content (an annotator may be filling it); "
                "pass --out to write the new pool elsewhere, or move the old one away"
            )
    written = []
    for name, text in texts.items():
        atomic_write_text(out_dir / name, text)
        written.append(out_dir / name)
    return written
