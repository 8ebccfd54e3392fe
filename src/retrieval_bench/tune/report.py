"""tune.md and the terminal summary, from tune.json's content: the tuned figure against the
held-out one per type, each fold's choice, and the held-out comparison with the baseline."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from retrieval_bench.reports.tables import fmt, markdown_table, text_table


def _signed(value: Any) -> str:
    return "undef" if value is None else f"{value:+.3f}"


def _p(value: Any) -> str:
    return "<0.001" if isinstance(value, float) and value < 0.001 else fmt(value)


def _ci(row: Mapping[str, Any]) -> str:
    low, high = row.get("ci_low"), row.get("ci_high")
    ends = ["-inf" if low is None else f"{low:+.3f}", "inf" if high is None else f"{high:+.3f}"]
    return f"[{ends[0]}, {ends[1]}]"


def sections(summary: Mapping[str, Any]) -> list[tuple[str, list[str], list[list[Any]]]]:
    """(title, header, rows) of each table."""
    metric = summary["metric"]
    estimate = [
        [qtype, row["n"], row["tuned_score"], row["held_out_score"], _signed(row["gap"])]
        for qtype, row in summary["by_type"].items()
    ]
    folds = [
        [f["fold"], len(f["train_ids"]), len(f["test_ids"]), f["train_score"], f["test_score"],
         " ".join(f["chosen"])]
        for f in summary["folds"]
    ]  # fmt: skip
    baseline = summary["baseline"]
    comparison = [
        [qtype, row["n"], row["baseline"], row["value"], _signed(row["diff"]), _ci(row),
         _p(row["p_adjusted"]), "yes" if row["significant"] else (row.get("note") or "no")]
        for qtype, row in baseline["held_out_comparison"].items()
    ]  # fmt: skip
    return [
        (
            f"Tuned vs held-out {metric} per query type (gap = optimism of the tuned figure)",
            ["type", "n", "tuned", "held-out", "gap"],
            estimate,
        ),
        (
            "Folds (each searched on the other folds, scored on its own queries)",
            ["fold", "train", "test", "train score", "test score", "chosen"],
            folds,
        ),
        (
            f"Held-out queries: tuned (each fold's choice) vs baseline "
            f"({' '.join(baseline['chosen']) or 'the job as composed'})",
            ["type", "n", "baseline", "tuned", "diff", "CI", "p adj.", "significant"],
            comparison,
        ),
    ]


def _render(
    summary: Mapping[str, Any], table: Callable[[Sequence[str], Sequence[Sequence[Any]]], str]
) -> list[str]:
    lines = [
        f"{summary['dataset']}: {summary['metric']} at {summary['stage']}, "
        f"{summary['settings']['folds']} folds x {summary['settings']['trials']} trials "
        f"({summary['settings']['sampler']})",
        f"tuned (chosen and scored on all queries): {fmt(summary['tuned_score'])}; "
        f"held-out (mean over folds): {fmt(summary['held_out_score'])}; "
        f"gap {_signed(summary['gap'])}",
        f"chosen on all queries: {' '.join(summary['tuned']['chosen'])}",
    ]
    if "type_source" in summary:
        lines.append(f"query type of the per-type weights: {summary['type_source']}")
    for title, header, rows in sections(summary):
        lines += ["", title, "", table(header, rows)]
    return lines


def tune_markdown(summary: Mapping[str, Any]) -> str:
    body = _render(summary, markdown_table)
    return "\n".join(["# Tuning", "", *body, ""])


def tune_text(summary: Mapping[str, Any]) -> str:
    return "\n".join(_render(summary, text_table))
