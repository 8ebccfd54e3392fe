"""The sign-flip test, Holm, and the verdict and ablation rules (`stats.verdicts`) on hand-made
per-query values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from retrieval_bench.stats.corrections import holm
from retrieval_bench.stats.paired import min_p_value, paired_test
from retrieval_bench.stats.settings import SignificanceSettings
from retrieval_bench.stats.verdicts import (
    LOSE,
    SECOND,
    TIE,
    WIN,
    delta_cells,
    paired_values,
    verdict_cell,
)

SIG = SignificanceSettings(n_resamples=5000)


def test_holm_matches_the_textbook_step_down() -> None:
    # m = 4: sorted p 0.005, 0.01, 0.03, 0.04 -> x4, x3, x2, x1 with running max.
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([]) == []
    assert holm([0.6, 0.9]) == [1.0, 1.0]


def test_exact_sign_flip_p_value() -> None:
    # 8 pairs, all differences positive and equal: only the observed signs and their mirror
    # reach |mean| -> p = 2 / 2**8.
    result = paired_test(np.ones(8), np.full(8, 0.5), SIG)
    assert result.p_value == pytest.approx(2 / 256)
    assert (result.diff, result.ci_low, result.ci_high) == (0.5, 0.5, 0.5)
    # Same data with scipy's own exact test on distinct differences.
    a = np.array([0.9, 0.8, 1.0, 0.7, 0.95, 0.85, 0.6, 0.75])
    b = np.array([0.1, 0.2, 0.3, 0.15, 0.05, 0.25, 0.35, 0.4])
    ours = paired_test(a, b, SIG)
    from scipy import stats  # here, not at collection (see tests/support/references.py)

    ref = stats.permutation_test(
        (a, b),
        lambda x, y, axis: np.mean(x - y, axis=axis),
        permutation_type="samples",
        vectorized=True,
        n_resamples=10_000,
    )
    assert ours.p_value == pytest.approx(ref.pvalue)
    assert ours.p_value == 2 / 2**8  # exact: every one of the 2^8 sign flips enumerated
    # The bootstrap CI with the fixed seed, to the last digit.
    assert (ours.diff, ours.ci_low, ours.ci_high) == pytest.approx((0.59375, 0.4, 0.766666666667))


def test_paired_test_is_reproducible_and_two_sided() -> None:
    rng = np.random.default_rng(3)
    a = rng.random(60)
    b = a - 0.05 + rng.normal(0, 0.1, 60)
    first, second = paired_test(a, b, SIG), paired_test(a, b, SIG)
    assert first == second
    swapped = paired_test(b, a, SIG)
    assert swapped.diff == pytest.approx(-first.diff)
    assert swapped.p_value == pytest.approx(first.p_value, abs=0.02)


def test_the_sign_flip_sums_are_the_same_whatever_blas_threads_the_process_has() -> None:
    """The products run on one BLAS thread (no spinning threads between a comparison's
    hundreds of tests): the same bits with two threads set as with one, where two threads
    used to split the sums differently at this size."""
    from threadpoolctl import threadpool_limits

    from retrieval_bench.stats.paired import SignFlip

    d = np.random.default_rng(0).normal(size=1000)
    with threadpool_limits(2, user_api="blas"):
        two = SignFlip(d, 10_000, 0)
    with threadpool_limits(1, user_api="blas"):
        one = SignFlip(d, 10_000, 0)
    assert np.array_equal(two.a, one.a) and np.array_equal(two.lower, one.lower)


def test_no_difference_gives_p_one_and_empty_gives_nan() -> None:
    assert paired_test([1, 0, 1], [1, 0, 1], SIG).p_value == 1.0
    empty = paired_test([], [], SIG)
    assert empty.n == 0 and math.isnan(empty.diff)
    with pytest.raises(ValueError):
        paired_test([1, 2], [1], SIG)


def test_min_p_value() -> None:
    assert min_p_value(3, 10_000) == pytest.approx(0.25)
    assert min_p_value(20, 9_999) == pytest.approx(2 / 10_000)


def _values(*columns: list[float]) -> dict[str, dict[str, float]]:
    return {
        label: {f"q{i:02d}": v for i, v in enumerate(column)}
        for label, column in zip(("A", "B", "C"), columns, strict=False)
    }


def test_win_second_lose() -> None:
    n = 12
    cell = verdict_cell(_values([1.0] * n, [0.5] * n, [0.0] * n), SIG)
    assert cell.verdicts == {"A": WIN, "B": SECOND, "C": LOSE}
    assert cell.best == "A" and cell.n == n
    assert set(cell.tests) == {"B", "C"}
    # 12 unanimous differences: p = 2 / 2^12 each (exact), doubled by Holm over two tests.
    assert {k: (t["p_value"], t["p_holm"]) for k, t in cell.tests.items()} == {
        "B": (2 / 2**12, 4 / 2**12),
        "C": (2 / 2**12, 4 / 2**12),
    }


def test_tie_with_the_best() -> None:
    rng = np.random.default_rng(0)
    a = rng.random(30).tolist()
    b = [v + rng.normal(0, 0.01) for v in a]  # noise around A: not different
    c = [0.0] * 30
    cell = verdict_cell(_values(a, b, c), SIG)
    assert cell.best is None
    assert cell.verdicts["C"] == LOSE
    assert {cell.verdicts["A"], cell.verdicts["B"]} == {TIE}


def test_too_few_queries_decides_nothing() -> None:
    cell = verdict_cell(_values([1.0] * 3, [0.0] * 3), SIG, min_queries=5)
    assert cell.verdicts == {} and cell.best is None
    assert "too few queries" in cell.note and "n=3" in cell.note
    # Above min_queries but still unable to reach alpha after Holm (2/2**5 * 2 > 0.05).
    cell = verdict_cell(_values([1.0] * 5, [0.0] * 5, [0.0] * 5), SIG, min_queries=5)
    assert cell.verdicts == {} and "no difference could be significant" in cell.note


def test_only_queries_scored_by_all_are_paired() -> None:
    values = {"A": {"q1": 1.0, "q2": 0.0, "q3": 1.0}, "B": {"q1": 0.0, "q3": 0.5}}
    qids, arrays, unpaired = paired_values(values)
    assert qids == ["q1", "q3"] and unpaired == 1
    assert arrays["A"].tolist() == [1.0, 1.0] and arrays["B"].tolist() == [0.0, 0.5]
    cell = verdict_cell(values, SIG)
    assert cell.n == 2 and cell.unpaired == 1
    assert cell.means == {"A": 1.0, "B": 0.25}


def test_delta_cells_mark_significance_after_holm() -> None:
    base = {f"q{i}": 0.0 for i in range(12)}
    up = {f"q{i}": 1.0 for i in range(12)}
    same = dict(base)
    deltas = delta_cells(base, {"top_k=8": up, "top_k=10": same}, SIG)
    by_name = {d.setting: d for d in deltas}
    assert by_name["top_k=8"].significant and by_name["top_k=8"].diff == 1.0
    assert not by_name["top_k=10"].significant and by_name["top_k=10"].diff == 0.0
    assert by_name["top_k=8"].p_holm == pytest.approx(2 * by_name["top_k=8"].p_value)
