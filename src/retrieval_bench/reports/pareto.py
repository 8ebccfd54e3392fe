"""comparison.md's `## Cost beside quality`: each configuration's costs, and per query type the
Pareto front of each metric against p95 latency and against index size (`compare.cost`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from retrieval_bench.reports.cost import mebibytes, seconds
from retrieval_bench.reports.tables import markdown_table

LEGEND = (
    "A configuration is dominated by a front configuration that is cheaper and not "
    "significantly worse (the tiers' pairwise tests, corrected as they are), or as cheap and "
    "significantly better; taken cheapest first, what is not dominated joins the front, so "
    "each front configuration is significantly better than every cheaper one (`→`); "
    "the others are dominated (by whom: `cost.pareto` in comparison.json, and "
    "comparison.html's plot). Costs as measured once, on the machine named; a configuration "
    "without costs (a job recorded before them) is left out."
)


def _ms(value: Any) -> str:
    return "—" if not isinstance(value, (int, float)) else f"{value:.3f}"


def cost_rows(systems: Mapping[str, Mapping[str, Any] | None]) -> list[list[Any]]:
    rows = []
    for label, c in systems.items():
        if not c:
            rows.append([label, *(["—"] * 6), "not recorded"])
            continue
        rows.append(
            [
                label,
                _ms(c.get("p50_ms")),
                _ms(c.get("p95_ms")),
                mebibytes(c.get("index_bytes")),
                mebibytes(c.get("disk_bytes")),
                seconds(c.get("build_cold_s")),
                mebibytes(c.get("peak_rss_bytes")),
                c.get("machine", ""),
            ]
        )
    return rows


def front_text(entry: Mapping[str, Any]) -> str:
    """`a → b`: the front, cheapest first (or why the cell has none)."""
    return " → ".join(entry["front"]) or entry.get("note") or "—"


def pareto_section(ds: Mapping[str, Any]) -> list[str]:
    """The section, or nothing when the record has no costs."""
    cost = ds.get("cost")
    if not cost or not any(cost["systems"].values()):
        return []
    lines = [
        "## Cost beside quality",
        "",
        "Per configuration (its job's `manifest.json` `cost`): latency one query at a time, "
        "end to end; index in memory and cache on disk; the cold build (prepare + index); "
        "the job's peak resident memory.",
        "",
        markdown_table(
            [
                "configuration",
                "p50 ms",
                "p95 ms",
                "index MiB",
                "disk MiB",
                "cold build s",
                "peak RSS MiB",
                "machine",
            ],
            cost_rows(cost["systems"]),
        ),
        "",
    ]
    if len(cost["machines"]) > 1:
        lines += [
            "**The jobs ran on different machines** (" + "; ".join(cost["machines"]) + "): "
            "their costs do not compare.",
            "",
        ]
    lines += [LEGEND, ""]
    metrics = ds["metrics"]
    for axis, what in cost["axes"].items():
        fronts = cost["pareto"][axis]
        rows = [[t, *(front_text(fronts[m["spec"]][t]) for m in metrics)] for t in ds["types"]]
        lines += [
            f"### Pareto front: quality against {what}",
            "",
            markdown_table(["type", *(m["heading"] for m in metrics)], rows),
            "",
        ]
    return lines
