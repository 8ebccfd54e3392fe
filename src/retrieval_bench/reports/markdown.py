"""report.md: the tables a person reads first, every number traceable to metrics.json."""

from __future__ import annotations

from typing import Any

from retrieval_bench.experiment import JobResult
from retrieval_bench.reports.tables import (
    core_columns,
    exclusions_line,
    markdown_table,
    per_type_rows,
)


def job_report(result: JobResult, config: dict[str, Any]) -> str:
    cutoffs = result.metrics["cutoffs"]
    retriever = config.get("retriever", {})
    lines = [
        f"# {result.dataset.name}: {retriever.get('name')} (top_k {config.get('top_k')})",
        "",
        f"{len(result.dataset.passages)} passages, {len(result.dataset.queries)} queries. "
        "Metrics are macro means over scored queries unless named `pooled` "
        "(sum of hits / sum of relevant). `recall_bound` is the best recall any ranking could "
        "reach at that depth. Per-query values: `rankings.jsonl`, `metrics.json`.",
        "",
    ]
    for name, stage in result.metrics["stages"].items():
        lines += [f"## Stage `{name}`", "", exclusions_line(stage), ""]
        for k in cutoffs:
            columns = [*core_columns(k), f"precision@{k}", f"judged@{k}"]
            lines += [
                f"@{k}",
                "",
                markdown_table(["type", "n", *columns], per_type_rows(stage, columns)),
                "",
            ]
    lines += [
        "## Timings (s)",
        "",
        markdown_table(["phase", "seconds"], sorted(result.timings.items())),
        "",
    ]
    return "\n".join(lines)
