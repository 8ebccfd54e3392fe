"""Label coverage of compared jobs: `judged@K` and the condensed metrics, per configuration.

Read from each job's overall values in metrics.json; a job scored before the condensed metrics
existed shows None for them (rescoring it brings them). See reports.coverage for the table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from retrieval_bench.jobdir.read import FinishedJob
from retrieval_bench.reports.coverage import coverage_specs


def label_coverage(jobs: Sequence[FinishedJob], stage: str) -> dict[str, Any]:
    """{"specs": [`judged@K`, ...], "values": {label: {spec: overall value or None}}}, `@K`
    being each job's own top_k (as the verdict tables read it)."""
    specs = coverage_specs("K")
    values = {}
    for job in jobs:
        overall = job.stage(stage).get("overall") or {}
        values[job.label] = {spec: overall.get(job.resolve_metric(spec)) for spec in specs}
    return {"specs": specs, "values": values}
