"""Plain metric tables shared by the terminal summary and report.md."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def fmt(value: Any) -> str:
    if value is None:
        return "undef"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def text_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [list(header), *[[fmt(v) for v in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    out = []
    for n, row in enumerate(cells):
        out.append(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def per_type_rows(stage: dict[str, Any], columns: Sequence[str]) -> list[list[Any]]:
    """One row per query type, then `all`; each row: type, n, the columns."""
    rows = []
    for qtype, group in sorted(stage["by_type"].items()):
        rows.append([qtype, group.get("n", 0), *(group.get(c) for c in columns)])
    overall = stage["overall"]
    rows.append(["all", overall.get("n", 0), *(overall.get(c) for c in columns)])
    return rows


def core_columns(k: int) -> list[str]:
    return [
        f"recall@{k}",
        f"recall_pooled@{k}",
        f"recall_bound@{k}",
        f"hit@{k}",
        f"all_hit@{k}",
        f"mrr@{k}",
        f"ndcg@{k}",
    ]


def exclusions_line(stage: Mapping[str, Any]) -> str:
    line = f"scored {stage['counts'].get('scored', 0)} queries; {excluded_text(stage)}"
    empty = stage["counts"].get("empty_rankings") or {}
    if empty:  # scored 0: the system returned nothing, and why
        line += "; empty rankings: " + ", ".join(f"{r} {n}" for r, n in sorted(empty.items()))
    return line


def excluded_text(stage: Mapping[str, Any]) -> str:
    """`excluded: <reason> <n>, ...` (or `none`) for a stage's or family's counts."""
    excluded = stage["counts"].get("excluded", {})
    parts = ", ".join(f"{reason} {n}" for reason, n in sorted(excluded.items())) or "none"
    return f"excluded: {parts}"
