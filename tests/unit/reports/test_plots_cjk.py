"""Figures draw Chinese query-type names with real glyphs, lower-is-better metrics apart, and
the trend marks months whose gate failed."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from retrieval_bench.benchmark.history import FAILED, PASSED
from retrieval_bench.benchmark.trend import _plot, trend_figure
from retrieval_bench.jobdir.names import PLOT_FILES
from retrieval_bench.reports import fonts
from retrieval_bench.reports.plots import PER_TYPE, per_type_figure, write_plots

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# matplotlib is imported in the tests that use it, as the product does: at collection it would
# cost every xdist worker ~0.35 s whether or not it runs this module.

K = 10
TYPES = ["负向实体", "多跳推理", "精确匹配"]


def _by_type(name: str, values: list[float]) -> dict[str, Any]:
    return {"by_type": {t: {name: v} for t, v in zip(TYPES, values, strict=True)}}


def _final_stage() -> dict[str, Any]:
    return {
        **_by_type(f"recall@{K}", [0.5, 0.75, 1.0]),
        "families": {
            "readable": _by_type(f"readable_recall@{K}", [0.25, 0.5, 1.0]),
            "leak": _by_type(f"leak_any@{K}", [0.125, 0.0, 0.5]),
        },
    }


def _glyph_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if "Glyph" in str(w.message)]


def _assert_fonts_have_glyphs(texts: list[str]) -> None:
    """Each character is in a font of the family list matplotlib falls back along."""
    import matplotlib
    from matplotlib import font_manager, ft2font

    families = matplotlib.rcParams["font.family"]
    paths = [
        font_manager.findfont(font_manager.FontProperties(family=f), fallback_to_default=False)
        for f in families
    ]
    faces = [ft2font.FT2Font(path) for path in paths]
    for text in texts:
        for char in text:
            assert any(face.get_char_index(ord(char)) != 0 for face in faces), (char, paths)


def test_cjk_font_is_the_packaged_noto_sans_cjk() -> None:
    from matplotlib import font_manager, ft2font

    path = fonts.packaged_font_path()
    assert path is not None and path.name == fonts.PACKAGED_FONT
    assert fonts.cjk_family() == fonts.CJK_FAMILY
    found = font_manager.findfont(
        font_manager.FontProperties(family=fonts.CJK_FAMILY), fallback_to_default=False
    )
    assert Path(found) == path
    assert ft2font.FT2Font(found).get_char_index(ord("负")) != 0


def test_job_plots_draw_chinese_types_without_missing_glyphs(tmp_path: Path) -> None:
    metrics = {"stages": {"final": _final_stage()}}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        written = write_plots(tmp_path, metrics, K, PLOT_FILES)
    assert written == {PER_TYPE: PLOT_FILES[PER_TYPE]}
    assert (tmp_path / PLOT_FILES[PER_TYPE]).is_file()
    assert _glyph_warnings(caught) == []
    with fonts.cjk_fonts():
        fig = per_type_figure(_final_stage(), K)
        assert fig is not None
        fig.canvas.draw()
        labels = [t.get_text() for t in fig.axes[-1].get_xticklabels()]
        assert labels == sorted(TYPES)
        _assert_fonts_have_glyphs(labels)


def test_lower_is_better_metrics_get_their_own_panel() -> None:
    from matplotlib.patches import Rectangle

    fig = per_type_figure(_final_stage(), K)
    assert fig is not None
    higher, lower = fig.axes
    legend_texts = [[t.get_text() for t in ax.get_legend().get_texts()] for ax in fig.axes]
    assert legend_texts == [[f"recall@{K}", f"readable_recall@{K}"], [f"leak_any@{K}"]]
    assert higher.get_ylabel() == "macro mean"
    assert lower.get_ylabel() == "macro mean, lower is better"
    # Bar heights are the by_type values, types in sorted order.
    leak = {t: v for t, v in zip(TYPES, [0.125, 0.0, 0.5], strict=True)}
    heights = [p.get_height() for p in lower.patches if isinstance(p, Rectangle)]
    assert heights == [leak[t] for t in sorted(TYPES)]


def test_without_lower_is_better_metrics_there_is_one_panel() -> None:
    stage = _final_stage()
    del stage["families"]["leak"]
    fig = per_type_figure(stage, K)
    assert fig is not None and len(fig.axes) == 1


def test_a_family_that_scored_nothing_draws_no_panel() -> None:
    # Leak on a set without roles: scored 0 queries, every type undefined; a panel of hatching
    # would only be noise.
    stage = _final_stage()
    stage["families"]["leak"] = {"by_type": {t: {} for t in TYPES}, "counts": {"scored": 0}}
    fig = per_type_figure(stage, K)
    assert fig is not None and len(fig.axes) == 1
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend == [f"recall@{K}", f"readable_recall@{K}"]


def _trend_points() -> list[dict[str, Any]]:
    months = {"2026-08": ("h1", PASSED), "2026-09": ("h1", FAILED), "2026-10": ("h2", PASSED)}
    return [
        {
            "month": month,
            "dataset": "demo",
            "retriever": "bm25",
            "type": t,
            "metric": "recall@K",
            "name": "recall@10",
            "value": 0.5,
            "n": 4,
            "labels": labels,
            "gate": gate,
        }
        for month, (labels, gate) in months.items()
        for t in TYPES
    ]


def test_trend_marks_failed_gate_months_and_label_changes() -> None:
    with fonts.cjk_fonts():
        fig: Figure = trend_figure(_trend_points(), "demo", ["recall@K"])
    legend = fig.legends[0]
    assert [t.get_text() for t in legend.get_texts()] == ["bm25", "labels changed", "gate failed"]
    for ax in fig.axes:
        spans = [p for p in ax.patches if p.get_facecolor()[:3] == (1.0, 0.0, 0.0)]
        # The shaded span covers month index 1 (2026-09), the one whose gate failed.
        assert [(round(p.get_x(), 2), round(p.get_width(), 2)) for p in spans] == [(0.6, 0.8)]
        dashed = [line.get_xdata()[0] for line in ax.get_lines() if line.get_linestyle() == "--"]
        assert dashed == [1.5]


def test_trend_png_draws_chinese_types_without_missing_glyphs() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        png = _plot(_trend_points(), "demo", ["recall@K"])
    assert png.startswith(b"\x89PNG")
    assert _glyph_warnings(caught) == []


@pytest.mark.parametrize(
    ("metric", "lower"),
    [
        ("leak_any@10", True),
        ("negative_entity_rate@5", True),
        ("unexpected_entity_rate_pooled@10", True),
        ("recall@10", False),
        ("readable_recall@10", False),
    ],
)
def test_lower_is_better(metric: str, lower: bool) -> None:
    from retrieval_bench.scoring.families import lower_is_better

    assert lower_is_better(metric) is lower
