"""The tiers of a comparison record (`compare.tiers`) in comparison.md and on the terminal:
per metric and query type, which configurations are tied for first, second, ..., and where
each configuration's rank lies."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from retrieval_bench.reports.tables import markdown_table, text_table


def tiers_text(cell: Mapping[str, Any]) -> str:
    """`1: a, b · 2: c`, or the note when the cell has no tiers."""
    if not cell.get("tiers"):
        return str(cell.get("note") or "—")
    return " · ".join(f"{i}: {', '.join(tier)}" for i, tier in enumerate(cell["tiers"], 1))


def member_text(cell: Mapping[str, Any], label: str) -> str:
    """One configuration in a cell: mean, tier, rank and its interval; `≈ x` names the
    configurations of higher tiers it is not separated from."""
    mean = cell["means"].get(label)
    parts = [
        "—" if mean is None or (isinstance(mean, float) and math.isnan(mean)) else f"{mean:.3f}"
    ]
    tier = (cell.get("tier_of") or {}).get(label)
    if tier is not None:
        parts.append(f"T{tier}")
    rank = (cell.get("ranks") or {}).get(label)
    if rank:
        parts.append(f"r{rank['observed']} [{rank['low']}–{rank['high']}]")
    above = (cell.get("unseparated_above") or {}).get(label)
    if above:
        parts.append("≈ " + ", ".join(above))
    return " ".join(parts)


def _rows(ds: Mapping[str, Any], spec: str) -> list[list[Any]]:
    labels = [c["label"] for c in ds["configurations"]]
    rows = []
    for t in ds["types"]:
        cell = ds["tiers"][spec][t]
        rows.append([t, cell["n"], tiers_text(cell), *(member_text(cell, x) for x in labels)])
    return rows


def _legend(settings: Mapping[str, Any]) -> str:
    correction = "BH" if settings.get("correction") == "bh" else "Holm"
    return (
        f"Every pair of configurations is tested (paired sign-flip test, {correction} over "
        f"{settings.get('family_scope', 'each cell')}, alpha {settings['alpha']:g}); X beats Y "
        "when that is significant and X's mean is better. Tier 1: every configuration no "
        "other beats; then the same among the rest, and so on. Significance is not "
        "transitive, so a configuration can sit a tier below one it is not separated from: "
        "`≈ x` names those. `T2`: the tier; `r3 [2–4]`: the rank of its mean (1 = best; "
        f"equal means share a rank) and its {100 * settings['confidence']:g}% bootstrap "
        f"interval ({settings.get('rank_resamples', 1000)} resamples of the queries, seed "
        f"{settings['seed']}). Tests per pair: `tiers` in comparison.json."
    )


def tiers_section(ds: Mapping[str, Any], settings: Mapping[str, Any]) -> list[str]:
    """comparison.md's `## Tiers per type`: one table per metric."""
    if not ds.get("tiers"):
        return []
    labels = [c["label"] for c in ds["configurations"]]
    lines = ["## Tiers per type", "", _legend(settings), ""]
    for m in ds["metrics"]:
        lines += [
            f"### Tiers: {m['heading']}",
            "",
            markdown_table(["type", "n", "tiers", *labels], _rows(ds, m["spec"])),
            "",
        ]
    return lines


def tiers_terminal(ds: Mapping[str, Any]) -> list[str]:
    """The terminal's tiers: per type, each metric's tiers in one table."""
    if not ds.get("tiers"):
        return []
    rows = [
        [t, *(tiers_text(ds["tiers"][m["spec"]][t]) for m in ds["metrics"])] for t in ds["types"]
    ]
    header = ["type", *(m["heading"] for m in ds["metrics"])]
    return [
        "",
        "Tiers (1: not beaten by any other; details in comparison.md)",
        text_table(header, rows),
    ]
