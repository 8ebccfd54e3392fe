"""What the terminal shows at the end of a job: the final stage per query type."""

from __future__ import annotations

from pathlib import Path

from retrieval_bench.experiment import JobResult
from retrieval_bench.reports.families import console_lines
from retrieval_bench.reports.router import router_summary
from retrieval_bench.reports.tables import core_columns, exclusions_line, per_type_rows, text_table


def job_summary(result: JobResult, k: int, job_dir: Path) -> str:
    stage = result.metrics["stages"]["final"]
    columns = core_columns(k)
    table = text_table(["type", "n", *columns], per_type_rows(stage, columns))
    embedded = result.embeddings.get("passages")
    cache = (
        f"; passages encoded {embedded['encoded']}, from cache {embedded['cached']}"
        if embedded
        else ""
    )
    router = result.metrics.get("router")
    return (
        f"\n{result.dataset.name}: final stage (top {k}), macro means per query type\n"
        f"{table}\n{exclusions_line(stage)}{cache}\n"
        + console_lines(result.metrics, k)
        + (router_summary(router, k) if router else "")
        + f"outputs: {job_dir}\n"
    )
