"""What the terminal shows at the end of a job: the final stage per query type, or, for a job
of a sweep, one line (the sweep's comparison at the end holds the tables)."""

from __future__ import annotations

from pathlib import Path

from retrieval_bench.job.result import JobResult
from retrieval_bench.reports.families import console_lines
from retrieval_bench.reports.robustness import job_view, robustness_text
from retrieval_bench.reports.router import router_summary
from retrieval_bench.reports.tables import (
    core_columns,
    exclusions_line,
    fmt,
    per_type_table,
    text_table,
)


def job_summary(result: JobResult, k: int, job_dir: Path) -> str:
    stage = result.metrics["stages"]["final"]
    table = "\n".join(per_type_table(stage, core_columns(k), text_table))
    router = result.metrics.get("router")
    return (
        f"\n{result.dataset.name}: final stage (top {k}), macro means per query type\n"
        f"{table}\n{exclusions_line(stage)}{_cache_text(result)}\n"
        + console_lines(result.metrics, k)
        + (router_summary(router, k) if router else "")
        + _robustness_text(result)
        + f"outputs: {job_dir}\n"
    )


def _robustness_text(result: JobResult) -> str:
    robustness = result.metrics.get("robustness")
    if not robustness:
        return ""
    return "\n".join(robustness_text(job_view(robustness, "this job", {})))[1:] + "\n"


def job_line(result: JobResult, k: int, job_dir: Path, label: str) -> str:
    """One line for one job of a sweep: its headline numbers, what was scored, where it is.

    `label` names the job among its siblings (Hydra's job number and overrides)."""
    overall = result.metrics["stages"]["final"]["overall"]
    numbers = ", ".join(f"{m} {fmt(overall.get(m))}" for m in (f"ndcg@{k}", f"recall@{k}"))
    stage = result.metrics["stages"]["final"]
    return f"job {label}: {numbers}; {exclusions_line(stage)}{_cache_text(result)} -> {job_dir}"


def _cache_text(result: JobResult) -> str:
    embedded = result.embeddings.get("passages")
    if not embedded:
        return ""
    return f"; passages encoded {embedded['encoded']}, from cache {embedded['cached']}"
