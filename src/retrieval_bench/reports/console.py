"""What the terminal shows at the end of a job: the final stage per query type, or, for a job
of a sweep, one line (the sweep's comparison at the end holds the tables)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from retrieval_bench.config.schema import DOC, PASSAGE
from retrieval_bench.job.result import JobResult
from retrieval_bench.reports.families import console_lines
from retrieval_bench.reports.learned_router import learned_text
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
    learned = result.metrics.get("learned_router")
    return (
        f"\n{table_heading(result.dataset.name, result.metrics, k)}\n"
        f"{table}\n{exclusions_line(stage)}{_cache_text(result)}\n"
        + console_lines(result.metrics, k)
        + (router_summary(router, k) if router else "")
        + (learned_text(learned) + "\n" if learned else "")
        + _robustness_text(result)
        + f"outputs: {job_dir}\n"
    )


def _robustness_text(result: JobResult) -> str:
    robustness = result.metrics.get("robustness")
    if not robustness:
        return ""
    return "\n".join(robustness_text(job_view(robustness, "this job", {})))[1:] + "\n"


def table_heading(dataset: str, metrics: dict[str, Any], k: int) -> str:
    """What the terminal table shows: the stage (`final`, the cut to top_k, whatever stage
    came after it), the unit scored (a passage, or with `scoring.unit=doc` a document) and the
    means; a later stage such as `context` is named as scored in report.md, not here."""
    unit = metrics.get("unit", PASSAGE)
    scored = "documents (scoring.unit=doc)" if unit == DOC else "passages"
    stages = list(metrics["stages"])
    later = stages[stages.index("final") + 1 :]
    heading = (
        f"{dataset}: final stage (the cut to top {k}), {scored} scored, macro means per query "
        "type"
    )
    if later:
        heading += f"\n(later stage{'s' if len(later) > 1 else ''} {', '.join(later)}: "
        heading += "scored in report.md and metrics.json)"
    return heading


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
