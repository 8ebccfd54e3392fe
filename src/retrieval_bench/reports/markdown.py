"""report.md: the tables a person reads first, every number traceable to metrics.json."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from retrieval_bench.config.schema import DOC, PASSAGE
from retrieval_bench.job.result import JobResult
from retrieval_bench.reports.cost import cost_section
from retrieval_bench.reports.coverage import job_coverage_section
from retrieval_bench.reports.families import (
    evidence_section,
    family_tables,
    group_by_section,
    headline_section,
    refusal_section,
)
from retrieval_bench.reports.learned_router import learned_markdown
from retrieval_bench.reports.plots import ROBUSTNESS
from retrieval_bench.reports.robustness import job_view, robustness_markdown
from retrieval_bench.reports.router import router_section
from retrieval_bench.reports.service import service_lines
from retrieval_bench.reports.stage_loss import stage_loss_section
from retrieval_bench.reports.tables import (
    exclusions_line,
    markdown_table,
    paragraphs,
    per_type_table,
    stage_columns,
)


def job_report(
    result: JobResult, config: dict[str, Any], plots: Mapping[str, str] | None = None
) -> str:
    """The report; `plots` are the figures written beside it (`reports.plots` kind -> path
    relative to the job, as `write_plots` returns them)."""
    plots = plots or {}
    cutoffs = result.metrics["cutoffs"]
    retriever = config.get("retriever", {})
    router = config.get("router", {}).get("name", "none")
    system = retriever.get("name") if router == "none" else f"router={router}"
    lines = [
        f"# {result.dataset.name}: {system} (top_k {config.get('top_k')})",
        "",
        f"{len(result.dataset.passages)} passages, {len(result.dataset.queries)} queries. "
        "Metrics are macro means over scored queries unless named `pooled` "
        "(sum of hits / sum of relevant). `recall_bound` is the best recall any ranking could "
        "reach at that depth. Per-query values: `rankings.jsonl`, `metrics.json`.",
        "",
        unit_line(result.metrics.get("unit", PASSAGE)),
        "",
    ]
    lines += arm_input_section(result.indexes)
    lines += own_acl_lines(result.own_acl_arms)
    top_k = int(config.get("top_k", cutoffs[0]))
    if "router" in result.metrics:
        lines += router_section(result.metrics["router"], top_k)
    if "learned_router" in result.metrics:
        lines += learned_markdown(result.metrics["learned_router"])
    lines += headline_section(result.metrics, top_k, plots)
    if result.metrics.get("robustness"):
        view = job_view(result.metrics["robustness"], "this job", config.get("compare") or {})
        figure = plots.get(ROBUSTNESS)
        lines += robustness_markdown(view, figure)
    lines += refusal_section(result.metrics.get("refusal"), plots)
    lines += evidence_section(result.metrics, plots)
    lines += group_by_section(result.metrics, top_k)
    lines += job_coverage_section(result.metrics, top_k)
    lines += stage_loss_section(result.metrics.get("stage_loss"))
    for name, stage in result.metrics["stages"].items():
        lines += [f"## Stage `{name}`", "", exclusions_line(stage), ""]
        deep = stage.get("depth_exceeds_list") or {}
        for k in cutoffs:
            columns = stage_columns(k)
            table = per_type_table(stage, columns, markdown_table)
            title = f"@{k}"
            if k in deep.get("cutoffs", ()):
                title += f" ‡ deeper than this stage's lists ({deep['list_length']}): not measured"
            lines += paragraphs(title, *table) if table else []
        lines += family_tables(stage, cutoffs)
    lines += service_lines(result.indexes)
    lines += cost_section(result.cost)
    lines += [
        "## Timings (s)",
        "",
        markdown_table(["phase", "seconds"], sorted(result.timings.items())),
        "",
    ]
    return "\n".join(lines)


def own_acl_lines(arms: Sequence[str]) -> list[str]:
    """Which arms were trusted with their own access control (job.contract): the pipeline did
    not impose the filter on them, so leak@K is what they let through."""
    if not arms:
        return []
    names = ", ".join(f"`{name}`" for name in arms)
    return [
        f"Trusted with their own access control: {names}. The filter (cities, permissions, "
        "exclusions) was not imposed on these arms; leak@K measures what they let through.",
        "",
    ]


def unit_line(unit: str) -> str:
    """What one scored item was (`scoring.unit`)."""
    if unit == DOC:
        return (
            "Scored unit: **document** (`scoring.unit=doc`): each ranking scored as its "
            "passages' documents, first occurrence; a document's grade is the highest of its "
            "labels. `rankings.jsonl` keeps the passages; `trec/` and `qrels.trec` hold "
            "documents."
        )
    return "Scored unit: **passage**."


def arm_input_section(arms: Mapping[str, Mapping[str, Any] | None]) -> list[str]:
    """One line per arm that reads outside input (a run file, a service) with what it counted
    in it (`info()["bad_input"]`), zeros included, so the report shows it was checked."""
    lines = []
    for name, info in arms.items():
        counts = (info or {}).get("bad_input")
        if counts is not None:
            detail = ", ".join(f"{key} {n}" for key, n in counts.items())
            lines.append(f"- `{name}`: {detail}")
    if not lines:
        return []
    note = "Counted, never dropped silently; examples in `manifest.json` (`arms.<name>`):"
    return ["## Arm input", "", note, "", *lines, ""]
