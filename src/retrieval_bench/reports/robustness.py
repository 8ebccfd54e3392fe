"""The robustness tables and heatmap: per query type, arm x kind, each cell the paired difference
(variant minus original) with its verdict and `stable@K` (`scoring.robustness`).

One layout (a *view*) serves a job (its one arm: report.md, report.html) and a sweep (every job
as an arm: comparison.md, comparison.html, `robustness.png`):

    {"stage", "k", "metrics": [...], "arms": [...], "kinds": [...], "types": [...],
     "cells": {metric: {type: {arm: {kind: cell}}}},
     "stable": {type: {arm: {kind: {"stable", "n"}}}},
     "counts": [{"kind", "library", "variants", "left_out", "scored"}], "family", "correction"}
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval_bench.config.compare import CORRECTIONS, FAMILY_SCOPE
from retrieval_bench.io.atomic import atomic_write_bytes
from retrieval_bench.reports.fonts import cjk_fonts
from retrieval_bench.reports.tables import markdown_table
from retrieval_bench.scoring.robustness import NO_EFFECT
from retrieval_bench.stats.verdicts import ALL

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# Verdict marks in the tables.
MARKS = {"degrades": "▼", "improves": "▲", "holds": "=", NO_EFFECT: "≡", "": "?"}
FAMILY_WORDS = {
    "cell": "each cell alone",
    "metric": "every arm x kind x type cell of one metric",
    "table": "every cell of every metric",
}


def job_view(robustness: Mapping[str, Any], label: str, settings: Mapping[str, Any]) -> dict:  # type: ignore[type-arg]
    """The view of one job's metrics.json `robustness`, its one arm named `label`."""
    cells = {
        metric: {qtype: {label: by_kind} for qtype, by_kind in by_type.items()}
        for metric, by_type in (robustness.get("cells") or {}).items()
    }
    stable = {
        qtype: {label: by_kind} for qtype, by_kind in (robustness.get("stable") or {}).items()
    }
    return {
        "stage": robustness.get("stage", "final"),
        "k": robustness.get("k"),
        "metrics": list(robustness.get("metrics") or []),
        "arms": [label],
        "kinds": [c["kind"] for c in robustness.get("kinds") or [] if c.get("scored")],
        "types": list(robustness.get("types") or []),
        "cells": cells,
        "stable": stable,
        "counts": list(robustness.get("kinds") or []),
        "family": settings.get("family", "table"),
        "correction": settings.get("correction", "holm"),
    }


def at(
    view: Mapping[str, Any], metric: str, qtype: str, arm: str, kind: str
) -> tuple[Mapping[str, Any] | None, Mapping[str, Any] | None]:
    """(the cell, its stable@K share) of one metric, type, arm and kind; None where absent."""
    cell = (((view["cells"].get(metric) or {}).get(qtype) or {}).get(arm) or {}).get(kind)
    stable = ((view["stable"].get(qtype) or {}).get(arm) or {}).get(kind)
    return cell, stable


def shown_types(view: Mapping[str, Any]) -> list[str]:
    """The types to draw: every type and `all`, or `all` alone when it is the only type's copy
    (a set whose queries share one type, such as a BEIR set without types)."""
    types = list(view["types"])
    return [ALL] if len(types) == 2 and ALL in types else types


def _cell_text(cell: Mapping[str, Any] | None, stable: Mapping[str, Any] | None) -> str:
    if cell is None:
        return "—"
    diff = cell.get("diff")
    number = "—" if diff is None else f"{diff:+.3f}"
    verdict = cell.get("verdict") or "no verdict"
    share = "" if not stable else f"; stable {stable['stable']:.2f}"
    return f"{number} {MARKS.get(cell.get('verdict') or '', '')} {verdict}{share} (n {cell['n']})"


def counts_lines(view: Mapping[str, Any]) -> list[str]:
    """One line per kind: its library, the variants scored, the queries left out and why."""
    out = []
    for entry in view["counts"]:
        left = entry.get("left_out") or {}
        reasons = "; ".join(f"{reason}: {n}" for reason, n in sorted(left.items()))
        text = f"- `{entry['kind']}` ({entry['library']}): {entry['variants']} variants"
        text += f", {entry.get('scored', 0)} scored"
        if left:
            text += f"; {sum(left.values())} queries left out ({reasons})"
        if not entry["variants"]:
            text += " — **changed no query**"
        out.append(text)
    return out


def robustness_markdown(view: Mapping[str, Any], heatmap: str | None = None) -> list[str]:
    """The section's lines: what each kind made, then per metric and type the arm x kind
    table; `heatmap`: the figure's path, linked above the tables."""
    family = FAMILY_WORDS.get(view["family"], FAMILY_SCOPE.get(view["family"], view["family"]))
    lines = [
        f"## Robustness: variant minus original, stage `{view['stage']}`",
        "",
        "Each cell: the mean difference of the metric, variant minus original, on the queries "
        "with a variant of that kind; its verdict (▼ `degrades` / ▲ `improves`: significant in "
        "the paired sign-flip test after "
        f"{CORRECTIONS.get(view['correction'], view['correction'])} over {family}; = `holds`: "
        "not significant; `no verdict`: too few queries to ever be significant; ≡ "
        f"`{NO_EFFECT}`: every variant is its original once normalised (NFKC, ASCII "
        "lowercase) and no value moved, so not tested and outside the family); "
        f"`stable@{view['k']}`: the share of those queries whose hit@{view['k']} is unchanged.",
        "",
        *counts_lines(view),
        "",
    ]
    if heatmap:
        lines += [f"![robustness heatmap]({heatmap})", ""]
    for metric in view["metrics"]:
        for qtype in shown_types(view):
            rows = [
                [arm, *(_cell_text(*at(view, metric, qtype, arm, k)) for k in view["kinds"])]
                for arm in view["arms"]
            ]
            lines += [
                f"### {metric}, type `{qtype}`",
                "",
                markdown_table(["arm", *view["kinds"]], rows),
                "",
            ]
    return lines


def robustness_text(view: Mapping[str, Any]) -> list[str]:
    """The terminal's lines: per metric, the `all` row of each arm x kind."""
    out = ["", f"robustness (variant minus original, stage {view['stage']}; stable@{view['k']}):"]
    for metric in view["metrics"]:
        for arm in view["arms"]:
            parts = [
                f"{kind} {_short(*at(view, metric, ALL, arm, kind))}" for kind in view["kinds"]
            ]
            out.append(f"  {metric} {arm}: " + ", ".join(parts))
    return out


def _short(cell: Mapping[str, Any] | None, stable: Mapping[str, Any] | None) -> str:
    if cell is None or cell.get("diff") is None:
        return "—"
    mark = MARKS.get(cell.get("verdict") or "", "")
    share = f" stable {stable['stable']:.2f}" if stable else ""
    return f"{cell['diff']:+.3f}{mark}{share}"


def heatmap_figure(view: Mapping[str, Any], metric: str) -> Figure | None:
    """One panel per type: arm x kind coloured by the difference (red: the variant scores
    lower), each cell annotated with the difference, its verdict mark and stable@K."""
    types, arms, kinds = shown_types(view), view["arms"], view["kinds"]
    if not types or not arms or not kinds:
        return None
    width = max(6.0, 1.1 * len(kinds) + 2.5)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, (0.45 * len(arms) + 1.1) * len(types) + 0.4))
    diffs = [
        abs(cell["diff"])
        for qtype in types
        for arm in arms
        for kind in kinds
        if (cell := at(view, metric, qtype, arm, kind)[0]) and cell.get("diff") is not None
    ]
    limit = max(diffs, default=0.0) or 1.0
    for row, qtype in enumerate(types, start=1):
        ax = fig.add_subplot(len(types), 1, row)
        grid = [[math.nan] * len(kinds) for _ in arms]
        for i, arm in enumerate(arms):
            for j, kind in enumerate(kinds):
                cell, stable = at(view, metric, qtype, arm, kind)
                if not cell or cell.get("diff") is None:
                    ax.text(j, i, "—", ha="center", va="center", fontsize=7)
                    continue
                grid[i][j] = cell["diff"]
                label = f"{cell['diff']:+.3f}{MARKS.get(cell.get('verdict') or '', '')}"
                if stable:
                    label += f"\n{stable['stable']:.2f}"
                ax.text(j, i, label, ha="center", va="center", fontsize=7)
        ax.imshow(grid, cmap="RdYlGn", vmin=-limit, vmax=limit, aspect="auto")
        ax.set_xticks(range(len(kinds)), kinds, fontsize=7)
        ax.set_yticks(range(len(arms)), arms, fontsize=7)
        ax.set_title(
            f"{metric}, type {qtype}: variant - original (▼▲ significant; stable@{view['k']})",
            fontsize=8,
        )
    fig.subplots_adjust(left=0.22, right=0.98, top=0.96, bottom=0.04, hspace=0.6)
    return fig


def write_heatmap(view: Mapping[str, Any], path: Path) -> Path | None:
    """The heatmap of the view's first metric as a PNG at `path` (None when there is nothing to
    draw). PNG metadata omits the matplotlib version, as every figure here."""
    if not view["metrics"]:
        return None
    with cjk_fonts():
        fig = heatmap_figure(view, view["metrics"][0])
        if fig is None:
            return None
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        FigureCanvasAgg(fig)
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=96, metadata={"Software": None})
    atomic_write_bytes(path, buffer.getvalue())
    return path


__all__: Sequence[str] = ["heatmap_figure", "job_view", "robustness_markdown", "write_heatmap"]
