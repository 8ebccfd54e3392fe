"""Plain metric tables shared by the terminal summary and report.md."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from retrieval_bench.scoring.registry import DOC, measures


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


def per_type_rows(stage: Mapping[str, Any], columns: Sequence[str]) -> list[list[Any]]:
    """One row per query type, then `all`; each row: type, n, the columns."""
    rows = []
    for qtype, group in sorted(stage["by_type"].items()):
        rows.append([qtype, group.get("n", 0), *(group.get(c) for c in columns)])
    overall = stage["overall"]
    rows.append(["all", overall.get("n", 0), *(overall.get(c) for c in columns)])
    return rows


def core_columns(k: int) -> list[str]:
    """The doc measures declared `headline` (scoring.registry), at cut-off k."""
    return [f"{m.name}@{k}" for m in measures(DOC) if m.headline]


def stage_columns(k: int) -> list[str]:
    """Every doc measure at cut-off k but the condensed variants (report.md shows those in
    its label-coverage table): a registered measure gets its column without another edit."""
    return [f"{m.name}@{k}" for m in measures(DOC)]


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


def trim_empty(
    header: Sequence[str],
    rows: Sequence[Sequence[Any]],
    count_columns: Collection[int] = (1,),
    counts: Mapping[str, Any] | None = None,
    row_kind: str = "types",
    total_row: bool = True,
) -> tuple[list[str], list[list[Any]], list[str]]:
    """The table without the rows and columns that hold no value, and a note for each cut.

    Column 0 names the row; the last row, with `total_row`, is the total (`all`) and stays. A row
    is left out when every value cell (not a label, not a count) is None, e.g. the `no_answer`
    type, which recall does not score; a value column when it is None in every row left. The
    notes say what was left out and, given the result's `counts` (its `by_type` exclusions),
    why: `types without scored queries: no_answer (13 queries; excluded: no_answer 13)`.
    """
    values = [i for i in range(1, len(header)) if i not in count_columns]
    body, total = (list(rows[:-1]), list(rows[-1:])) if total_row else (list(rows), [])
    kept = [list(r) for r in body if any(r[i] is not None for i in values)] + [
        list(r) for r in total
    ]
    dropped_rows = [str(r[0]) for r in body if all(r[i] is None for i in values)]
    empty = {i for i in values if all(r[i] is None for r in kept)}
    if len(empty) == len(values):  # nothing scored anywhere: the caller says so, not the table
        empty = set()
    keep = [i for i in range(len(header)) if i not in empty]
    notes = []
    if dropped_rows:
        notes.append(f"{row_kind} without scored queries: " + excluded_rows(dropped_rows, counts))
    if empty:
        notes.append(
            "columns without a value in any row: " + ", ".join(header[i] for i in sorted(empty))
        )
    return [header[i] for i in keep], [[r[i] for i in keep] for r in kept], notes


def excluded_rows(names: Sequence[str], counts: Mapping[str, Any] | None) -> str:
    """`name (n queries; excluded: reason n, ...)` per row left out, from `counts.by_type`."""
    by_type = (counts or {}).get("by_type", {})
    parts = []
    for name in names:
        excluded = by_type.get(name, {}).get("excluded", {})
        if excluded:
            reasons = ", ".join(f"{reason} {n}" for reason, n in sorted(excluded.items()))
            total = sum(excluded.values())
            parts.append(
                f"{name} ({total} quer{'y' if total == 1 else 'ies'}; excluded: {reasons})"
            )
        else:
            parts.append(name)
    return "; ".join(parts)


def per_type_table(
    result: Mapping[str, Any],
    columns: Sequence[str],
    render: Callable[[Sequence[str], Sequence[Sequence[Any]]], str],
) -> list[str]:
    """A per-type table of `columns` (rendered by markdown_table or text_table) without rows
    and columns that hold no value, then one line per note on what was left out. Nothing when
    the result scored no query at all: its exclusions line says why."""
    if not result["overall"].get("n"):
        return []
    header, rows, notes = trim_empty(
        ["type", "n", *columns], per_type_rows(result, columns), counts=result.get("counts")
    )
    return [render(header, rows), *notes]


def paragraphs(*blocks: str) -> list[str]:
    """report.md lines: each block (a heading, a table, a note) followed by a blank line."""
    return [line for block in blocks for line in (block, "")]
