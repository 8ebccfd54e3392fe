"""How far the labels reach: `judged@K` beside each headline metric and its condensed variant.

A plain metric counts an unjudged passage as non-relevant; its `_condensed` variant drops
unjudged passages before cutting to K. Where the two differ, the system is ranking passages
nobody judged, and a judgment pool (`python -m run.pool`) is what settles which number holds.
One table for a job's stages (report.md) and one for a comparison's configurations.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from retrieval_bench.reports.tables import fmt, markdown_table
from retrieval_bench.scoring.registry import CONDENSED_SUFFIX, DOC, measures

EXPLANATION = (
    "`judged@K`: share of the top K carrying a label (relevant or judged non-relevant). "
    "`*_condensed@K`: the metric with unjudged passages removed before cutting to K; a gap to "
    "the plain metric means unjudged passages count against the system: pool them "
    "(`python -m run.pool`) and judge them. While the labels are relevant ids only, a "
    "condensed list holds relevant passages only (an optimistic bound); imported non-relevant "
    "judgements make it a fair one."
)


def coverage_specs(k: int | str) -> list[str]:
    """`judged@K`, then each condensed metric after its plain one."""
    specs = [f"judged@{k}"]
    for measure in measures(DOC):
        if measure.condensed:
            specs += [f"{measure.name}@{k}", f"{measure.name}{CONDENSED_SUFFIX}@{k}"]
    return specs


def job_coverage_section(metrics: Mapping[str, Any], top_k: int) -> list[str]:
    """report.md: one row per recorded stage (overall), at the job's top_k."""
    specs = coverage_specs(top_k)
    rows = [
        [name, stage["overall"].get("n", 0), *(stage["overall"].get(s) for s in specs)]
        for name, stage in metrics["stages"].items()
    ]
    return [
        "## Label coverage",
        "",
        EXPLANATION,
        "",
        markdown_table(["stage", "n", *specs], rows),
        "",
    ]


def comparison_coverage_section(coverage: Mapping[str, Any] | None) -> list[str]:
    """comparison.md: one row per configuration (overall, at each job's own top_k)."""
    if not coverage:
        return []
    specs = coverage["specs"]
    rows = [
        [label, *(fmt(values.get(s)) for s in specs)]
        for label, values in coverage["values"].items()
    ]
    return [
        "## Label coverage",
        "",
        EXPLANATION,
        "",
        markdown_table(["configuration", *specs], rows),
        "",
    ]
