"""The trend over every finished benchmark month: each metric, per query type, through time.

Written to the benchmarks root: `trend.md` (one table per dataset and metric: rows are type x
retriever, columns are months), `trend.json` (the points) and `trend-<dataset>.png` (a grid:
one row per metric, one column per type and `all`, one line per retriever). Values are the
`by_type` / `overall` means of each job's metrics.json, at each job's own top_k for `@K`.

A month whose labels differ from the previous month's (its jobs' `labels.hash` in manifest.json)
is marked: `label_changes` in trend.json, `*` after the month in trend.md, a dashed line in the
plot. Its change in the trend is then partly the labels' (`python -m run.rescore` re-scores the
earlier months against the current labels). A month whose own gate failed (`gate` in each
point, from its gate.json) is shaded red in the plot.
"""

from __future__ import annotations

import io
import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval_bench.benchmark.history import (
    FAILED,
    finished_months,
    gate_status,
    inside,
    month_jobs,
)
from retrieval_bench.data.hashes import short
from retrieval_bench.io.atomic import atomic_write_bytes, atomic_write_json, atomic_write_text
from retrieval_bench.jobdir import names
from retrieval_bench.reports.fonts import cjk_fonts
from retrieval_bench.reports.tables import markdown_table
from retrieval_bench.stats.verdicts import ordered_types

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def collect(root: Path, metrics: Sequence[str], stage: str = "final") -> list[dict[str, Any]]:
    """One point per finished month x dataset x retriever x type x metric."""
    points: list[dict[str, Any]] = []
    for month_dir in finished_months(root):
        gate = gate_status(month_dir)
        for key, job in sorted(month_jobs(month_dir).items(), key=lambda kv: str(kv[0])):
            labels = (job.manifest.get("labels") or {}).get("hash")
            # An answer metric's groups come from answers.json, the others from the stage.
            by_metric = {spec: job.metric_groups(stage, spec) for spec in metrics}
            types = dict.fromkeys(t for groups in by_metric.values() for t in groups)
            for t in types:
                for spec in metrics:
                    name = job.resolve_metric(spec)
                    group = by_metric[spec].get(t)
                    if group is None:
                        continue
                    points.append(
                        {
                            "month": month_dir.name,
                            "dataset": key.dataset,
                            "retriever": key.retriever,
                            "type": t,
                            "metric": spec,
                            "name": name,
                            "value": group.get(name),
                            "n": group.get("n", 0),
                            "labels": labels,
                            "gate": gate,
                        }
                    )
    return points


def label_changes(points: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per dataset, each month whose labels hash differs from the previous month's (months
    with no recorded hash, from before hashes were recorded, are not compared)."""
    hashes: dict[str, dict[str, set[str]]] = {}
    for p in points:
        if p.get("labels"):
            hashes.setdefault(p["dataset"], {}).setdefault(p["month"], set()).add(p["labels"])
    changes = []
    for dataset, by_month in sorted(hashes.items()):
        months = sorted(by_month)
        for previous, month in itertools.pairwise(months):
            if by_month[month] != by_month[previous]:
                changes.append(
                    {
                        "dataset": dataset,
                        "month": month,
                        "previous_month": previous,
                        "from": sorted(by_month[previous]),
                        "to": sorted(by_month[month]),
                    }
                )
    return changes


def _markdown(points: Sequence[dict[str, Any]], metrics: Sequence[str]) -> str:
    months = sorted({p["month"] for p in points})
    changes = label_changes(points)
    lines = [
        "# Benchmark trend",
        "",
        f"Finished months: {', '.join(months) or 'none'}. Each cell: the month's mean "
        "(`@K` = that month's top_k). Plots: `trend-<dataset>.png`.",
        "",
    ]
    for dataset in sorted({p["dataset"] for p in points}):
        lines += [f"## {dataset}", "", f"![trend]({names.trend_png(dataset)})", ""]
        changed = {c["month"]: c for c in changes if c["dataset"] == dataset}
        for c in changed.values():
            lines.append(
                f"- {c['month']}*: labels differ from {c['previous_month']}'s "
                f"({', '.join(short(h) for h in c['from'])} -> "
                f"{', '.join(short(h) for h in c['to'])}): its change is partly the labels'."
            )
        if changed:
            lines.append("")
        columns = [f"{m}*" if m in changed else m for m in months]
        ds_points = [p for p in points if p["dataset"] == dataset]
        types = ordered_types([p["type"] for p in ds_points])
        retrievers = sorted({p["retriever"] for p in ds_points})
        for metric in metrics:
            index = {
                (p["type"], p["retriever"], p["month"]): p
                for p in ds_points
                if p["metric"] == metric
            }
            rows = []
            for t in types:
                for r in retrievers:
                    cells = [index.get((t, r, m), {}).get("value") for m in months]
                    if any(c is not None for c in cells):
                        rows.append([t, r, *cells])
            table = markdown_table(["type", "retriever", *columns], rows)
            lines += [f"### {metric}", "", table, ""]
    return "\n".join(lines)


def _plot(points: Sequence[dict[str, Any]], dataset: str, metrics: Sequence[str]) -> bytes:
    with cjk_fonts():
        fig = trend_figure(points, dataset, metrics)
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=100)
    return buffer.getvalue()


def trend_figure(points: Sequence[dict[str, Any]], dataset: str, metrics: Sequence[str]) -> Figure:
    """The grid of one dataset's trend; draw and save it inside `reports.fonts.cjk_fonts`."""
    # matplotlib is imported where a figure is drawn, not at an app's start.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    ds_points = [p for p in points if p["dataset"] == dataset]
    months = sorted({p["month"] for p in ds_points})
    types = ordered_types([p["type"] for p in ds_points])
    retrievers = sorted({p["retriever"] for p in ds_points})
    fig = Figure(figsize=(2.6 * len(types) + 1, 2.2 * len(metrics) + 0.8))
    FigureCanvasAgg(fig)
    axes = fig.subplots(
        len(metrics),
        len(types),
        sharex=True,
        sharey=True,
        squeeze=False,
    )
    x = range(len(months))
    changed = [months.index(c["month"]) for c in label_changes(ds_points) if c["month"] in months]
    failed = sorted({months.index(p["month"]) for p in ds_points if p.get("gate") == FAILED})
    for i, metric in enumerate(metrics):
        for j, t in enumerate(types):
            ax = axes[i][j]
            for r in retrievers:
                by_month = {
                    p["month"]: p["value"]
                    for p in ds_points
                    if p["metric"] == metric and p["type"] == t and p["retriever"] == r
                }
                ys = [by_month.get(m) for m in months]
                ax.plot(
                    list(x),
                    [float("nan") if y is None else y for y in ys],
                    marker="o",
                    label=r,
                )
            if i == 0:
                ax.set_title(t, fontsize=9)
            if j == 0:
                ax.set_ylabel(metric, fontsize=9)
            for position in changed:
                ax.axvline(position - 0.5, color="grey", linestyle="--", linewidth=1)
            for position in failed:
                ax.axvspan(position - 0.4, position + 0.4, color="red", alpha=0.12, linewidth=0)
            ax.set_ylim(-0.02, 1.02)
            ax.grid(alpha=0.3)
            ax.set_xticks(list(x))
            ax.set_xticklabels(months, rotation=45, fontsize=7)
    handles, labels = axes[0][0].get_legend_handles_labels()
    if changed:
        handles.append(Line2D([], [], color="grey", linestyle="--", linewidth=1))
        labels.append("labels changed")
    if failed:
        handles.append(Patch(color="red", alpha=0.12, linewidth=0))
        labels.append("gate failed")
    fig.legend(handles, labels, loc="upper right", fontsize=8)
    title = f"{dataset}: benchmark trend per query type"
    if changed:
        title += " (dashed: labels changed)"
    if failed:
        title += " (shaded: gate failed)"
    fig.suptitle(title)
    # Fixed margins in inches (the metric labels left, the rotated months below, the title and
    # the types above, the legend right) rather than tight_layout, which measures every axis
    # twice: with one axis per metric and type it was the largest part of drawing the trend.
    width, height = fig.get_size_inches()
    fig.subplots_adjust(
        left=0.75 / width,
        right=1 - 1.45 / width,
        bottom=0.7 / height,
        top=1 - 1.0 / height,
        wspace=0.08,
        hspace=0.12,
    )
    return fig


def write_trend(root: Path, metrics: Sequence[str], stage: str = "final") -> list[Path]:
    """Redraw trend.md, trend.json and one PNG per dataset from every finished month."""
    points = collect(root, metrics, stage)
    files = [root / names.TREND_MD, root / names.TREND_JSON]
    atomic_write_text(files[0], _markdown(points, metrics))
    atomic_write_json(
        files[1],
        {
            "metrics": list(metrics),
            "stage": stage,
            "label_changes": label_changes(points),
            "points": points,
        },
    )
    for dataset in sorted({p["dataset"] for p in points}):
        # A dataset name from an older month's job may not be a plain file name.
        path = inside(root, root / names.trend_png(dataset), "dataset.name")
        atomic_write_bytes(path, _plot(points, dataset, metrics))
        files.append(path)
    return files
