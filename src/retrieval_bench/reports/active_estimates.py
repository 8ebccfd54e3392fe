"""The estimates under a labelling plan (`active.estimate` builds the record): estimate.md, the
section comparison.md gets with `compare.estimate=active`, and the terminal's line."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DIFFERENCE = "difference"


def _name(row: Mapping[str, Any], systems: list[str]) -> str:
    a, b = systems
    return f"{a} - {b}" if row["quantity"] == DIFFERENCE else str(row["quantity"])


def active_estimates_section(record: Mapping[str, Any], level: str = "##") -> list[str]:
    """One table per query type: each system and the paired difference, people only beside
    the active estimate (with the judge's prediction), each with its interval."""
    a, b = record["systems"]
    lines = [
        f"{level} Estimates under the label plan `{record['plan']}`",
        "",
        f"Metric `{record['metric']}`; labels `{record['labels']}`; "
        f"strategy `{record['strategy']}`, {record['rounds']} of {record['planned_rounds']} "
        f"rounds (weights {', '.join(f'{w:.2f}' for w in record['weights'])}). `{a} - {b}`: the "
        "paired difference. `people`: people's labels only; `active`: with the judge's "
        "prediction (inverse-probability-weighted PPI). Each query chosen with its inclusion "
        f"probability (Poisson sampling); intervals at {record['confidence']:.0%}; the verdict: "
        "the interval of the difference excludes 0.",
        "",
    ]
    for warning in record["warnings"]:
        lines += [f"> warning: {warning}", ""]
    by_type: dict[str, list[Mapping[str, Any]]] = {}
    for row in record["rows"]:
        by_type.setdefault(row["type"], []).append(row)
    for group, rows in by_type.items():
        lines += [
            f"{level}# {group}",
            "",
            "| quantity | estimator | estimate | interval | se | labelled / queries | verdict |",
            "|---|---|---|---|---|---|---|",
        ]
        for row in rows:
            name = _name(row, [a, b])
            counts = f"{row['labelled']} / {row['queries']}"
            if "mean" in row:
                lines.append(
                    f"| {name} | {row['estimator']} | {row['mean']:.4f} | "
                    f"[{row['ci_low']:.4f}, {row['ci_high']:.4f}] | {row['se']:.4f} | "
                    f"{counts} | {row.get('verdict', '')} |"
                )
            else:
                lines.append(f"| {name} | {row['estimator']} | {row['note']} | | | {counts} | |")
        lines.append("")
    return lines


def active_estimates_markdown(record: Mapping[str, Any]) -> str:
    """estimate.md."""
    section = active_estimates_section(record, "#")
    return "\n".join(section)


def active_estimates_line(record: Mapping[str, Any]) -> str:
    """The terminal's line: the overall verdict of the active estimate of the difference."""
    a, b = record["systems"]
    for row in record["rows"]:
        if (row["type"], row["quantity"], row["estimator"]) == ("all", DIFFERENCE, "active"):
            if "mean" not in row:
                return f"label plan ({record['metric']}): {row['note']}"
            return (
                f"label plan ({record['metric']}, {row['labelled']} of {row['queries']} queries "
                f"labelled): {a} - {b} = {row['mean']:.4f} [{row['ci_low']:.4f}, "
                f"{row['ci_high']:.4f}], verdict {row['verdict']}"
            )
    return f"label plan ({record['metric']}): no estimate"
