"""PNG figures for report.md: the refusal curve, per-type bars, evidence completeness curves.

Drawn with matplotlib's object API on the Agg canvas (no pyplot state, no display needed) and
written atomically where the caller says (`jobdir.names.PLOT_FILES`: under `<job>/plots/`, one
file per figure kind of `FIGURES`). Query-type names may be Chinese: figures are drawn
with a CJK font (`reports.fonts`). Every plotted number is read from
metrics.json, so a figure never shows anything the file does not hold. PNG metadata omits the
matplotlib version, so the same metrics give the same bytes.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval_bench.io.atomic import atomic_write_bytes
from retrieval_bench.reports.fonts import cjk_fonts
from retrieval_bench.reports.robustness import heatmap_figure, job_view
from retrieval_bench.scoring.registry import lower_is_better

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# The figures a job may have, by kind: the refusal curve, per-type bars of the final stage,
# evidence completeness curves, the robustness heatmap (a job that ran perturbed variants).
REFUSAL, PER_TYPE, EVIDENCE, ROBUSTNESS = "refusal", "per_type", "evidence", "robustness"
FIGURES = (REFUSAL, PER_TYPE, EVIDENCE, ROBUSTNESS)


# Fixed margins rather than tight_layout, which renders each figure twice: in a sweep that
# second render was most of a job's own time.
_MARGINS = {"left": 0.1, "right": 0.97, "top": 0.9, "bottom": 0.13}


def _save(fig: Figure, path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(
        buffer, format="png", dpi=96, metadata={"Software": None}, pil_kwargs={"compress_level": 1}
    )
    atomic_write_bytes(path, buffer.getvalue())


def refusal_figure(refusal: Mapping[str, Any]) -> Figure | None:
    """answered-when-answerable and refused-when-unanswerable against the threshold."""
    table = refusal.get("table") or {}
    if (
        not table.get("threshold")
        or not table.get("answered_rate")
        or not table.get("refused_rate")
    ):
        return None
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.0))
    ax = fig.add_subplot()
    x = table["threshold"]
    ax.plot(x, table["answered_rate"], marker="o", ms=3, label="answered | answerable")
    ax.plot(x, table["refused_rate"], marker="s", ms=3, label="refused | unanswerable")
    balanced = refusal.get("balanced") or {}
    if balanced.get("threshold") is not None:
        t = balanced["threshold"]
        ax.axvline(t, color="grey", linestyle="--", linewidth=1)
        ax.annotate(
            f"balanced t={t:.4g}",
            (t, 0.02),
            textcoords="offset points",
            xytext=(4, 0),
            fontsize=8,
            color="grey",
        )
    ax.set_xlabel(f"threshold on the top score of stage '{refusal.get('stage')}'")
    ax.set_ylabel("share of queries")
    ax.set_ylim(-0.02, 1.02)
    counts = refusal.get("counts", {})
    refuse_n = sum((counts.get("should_refuse") or {}).values())
    ax.set_title(f"Refusal: {counts.get('should_answer', 0)} answerable, {refuse_n} unanswerable")
    ax.grid(alpha=0.3)
    ax.legend(loc="center left", fontsize=8)
    fig.subplots_adjust(**_MARGINS)
    return fig


def _per_type_bars(
    ax: Any, types: list[str], series: list[tuple[str, Mapping[str, Any], str]], k: int
) -> None:
    """One group of bars per type, one bar per series; an undefined value is hatched."""
    width = 0.8 / len(series)
    for i, (label, result, name) in enumerate(series):
        values = [(result["by_type"].get(t) or {}).get(name) for t in types]
        xs = [j + (i - (len(series) - 1) / 2) * width for j in range(len(types))]
        heights = [v if v is not None else 0.0 for v in values]
        ax.bar(xs, heights, width, label=f"{label}@{k}", color=f"C{i}")
        # An undefined value is drawn as a hatched outline, so it never reads as a defined 0.
        undefined = [x for x, v in zip(xs, values, strict=True) if v is None]
        if undefined:
            ax.bar(
                undefined,
                [1.0] * len(undefined),
                width,
                fill=False,
                hatch="//",
                edgecolor="lightgrey",
                linewidth=0,
            )
    ax.set_ylim(0, 1.15)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, ncols=len(series), loc="upper center")


def per_type_figure(stage: Mapping[str, Any], k: int) -> Figure | None:
    """Grouped bars per query type of the final stage: plain and readable recall and evidence
    chain completeness; below them, in their own panel, the lower-is-better metrics (the share
    of queries with a leak), so a high bar there never reads as a win. Missing bars are
    undefined."""
    families = stage.get("families", {})
    series = [
        ("recall", stage, f"recall@{k}"),
        ("readable_recall", families.get("readable"), f"readable_recall@{k}"),
        ("evidence_chain", families.get("evidence"), f"evidence_chain@{k}"),
        ("leak_any", families.get("leak"), f"leak_any@{k}"),
    ]
    # A family that scored no query (leak on a set without roles) would only draw hatching.
    series = [
        (label, result, name)
        for label, result, name in series
        if result and result.get("counts", {}).get("scored", 1) > 0
    ]
    types = sorted({t for _, result, _ in series for t in result.get("by_type", {})})
    if not types:
        return None
    panels = [
        [s for s in series if not lower_is_better(s[2])],
        [s for s in series if lower_is_better(s[2])],
    ]
    panels = [panel for panel in panels if panel]
    from matplotlib.figure import Figure

    fig = Figure(figsize=(max(6.4, 1.1 * len(types) + 2), 2.0 + 2.4 * len(panels)))
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    for ax, panel in zip(axes, panels, strict=True):
        _per_type_bars(ax, types, panel, k)
        lower = lower_is_better(panel[0][2])
        ax.set_ylabel("macro mean, lower is better" if lower else "macro mean", fontsize=8)
    axes[-1].set_xticks(range(len(types)), types, rotation=20, ha="right", fontsize=8)
    axes[0].set_title(
        f"Final stage per query type (top {k}); hatched = undefined (nothing scorable)",
        fontsize=10,
    )
    fig.subplots_adjust(**{**_MARGINS, "bottom": 0.9 / fig.get_figheight(), "hspace": 0.15})
    return fig


def evidence_figure(curves: Mapping[str, Any]) -> Figure | None:
    """evidence_chain@k against k, one line per hop count."""
    by_hops = curves.get("by_hops") or {}
    # Without any multi-hop chain the curve is plain hit@k, already in the report's tables.
    if not any(str(hops) != "1" for hops in by_hops):
        return None
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.0))
    ax = fig.add_subplot()
    for hops, curve in sorted(by_hops.items(), key=lambda item: int(item[0])):
        ax.plot(
            curves["k"],
            curve["evidence_chain"],
            marker="o",
            ms=3,
            label=f"{hops}-hop (n={curve['n']})",
        )
    ax.set_xlabel("k (depth)")
    ax.set_ylabel("share of chains complete in top k")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xticks(curves["k"])
    ax.set_title("Evidence chain completeness, final stage")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.subplots_adjust(**_MARGINS)
    return fig


def write_plots(
    job_dir: Path, metrics: Mapping[str, Any], k: int, files: Mapping[str, str]
) -> dict[str, str]:
    """Write every figure the metrics allow, each kind to its path in `files` (relative to
    `job_dir`, one per kind of `FIGURES`); returns kind -> path of those written."""
    missing = [kind for kind in FIGURES if kind not in files]
    if missing:
        raise ValueError(f"no file name for figure(s) {', '.join(missing)}")
    with cjk_fonts():
        return _write_plots(job_dir, metrics, k, files)


def _write_plots(
    job_dir: Path, metrics: Mapping[str, Any], k: int, files: Mapping[str, str]
) -> dict[str, str]:
    final = metrics.get("stages", {}).get("final", {})
    evidence = final.get("families", {}).get("evidence", {})
    figures = {
        REFUSAL: refusal_figure(metrics["refusal"]) if "refusal" in metrics else None,
        PER_TYPE: per_type_figure(final, k) if final else None,
        EVIDENCE: evidence_figure(evidence.get("curves", {})) if evidence else None,
    }
    if metrics.get("robustness"):  # the job's one arm x every kind, per type
        view = job_view(metrics["robustness"], "this job", {})
        figures[ROBUSTNESS] = heatmap_figure(view, view["metrics"][0]) if view["metrics"] else None
    written = {}
    for kind, fig in figures.items():
        if fig is not None:
            _save(fig, Path(job_dir) / files[kind])
            written[kind] = files[kind]
    return written
