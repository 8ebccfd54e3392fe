"""The prediction-powered mean against the published formula (Angelopoulos et al., Science 2023)
worked by hand, and the classical mean's normal-theory interval."""

from __future__ import annotations

import math

import numpy as np
import pytest

from retrieval_bench.stats.ppi import classical_mean, ppi_mean


def test_ppi_interval_is_the_published_formula_on_a_hand_case() -> None:
    """theta = mean_N(f) - mean_n(f - Y); CI theta +/- z sqrt(var_N(f)/N + var_n(f - Y)/n)
    (Angelopoulos et al. 2023, mean estimation), the sample variances with ddof 1 as in the
    classical interval (the paper's ppi_py divides by N and n: 3/16 and 2/3 here)."""
    f_unlabelled = [1.0, 0.0, 1.0, 1.0]  # N = 4: mean 3/4, variance (ddof 1) 3/4 / 3 = 1/4
    f_labelled = [1.0, 0.0, 1.0]  # n = 3
    y = [1.0, 1.0, 0.0]  # f - Y = 0, -1, 1: mean 0, variance (ddof 1) 2 / 2 = 1
    theta = 3 / 4 - 0
    se = math.sqrt((1 / 4) / 4 + 1 / 3)
    z = 1.959963984540054  # the 97.5% normal quantile
    estimate = ppi_mean(f_unlabelled, f_labelled, y, confidence=0.95)
    assert estimate.mean == pytest.approx(theta, abs=1e-15)
    assert estimate.se == pytest.approx(se, abs=1e-15)
    assert (estimate.low, estimate.high) == pytest.approx(
        (theta - z * se, theta + z * se), abs=1e-12
    )
    assert (estimate.n, estimate.n_predicted) == (3, 4)
    # A biased judge (it calls the first labelled unit relevant, people did not): the rectifier
    # moves the estimate down by the judge's mean error on the labelled units.
    biased = ppi_mean(f_unlabelled, [1.0, 1.0, 1.0], y)
    assert biased.mean == pytest.approx(3 / 4 - (0 + 0 + 1) / 3)


def test_classical_mean_interval() -> None:
    values = [0.2, 0.4, 0.9, 0.5]
    estimate = classical_mean(values, 0.9)
    half = 1.6448536269514722 * np.std(values, ddof=1) / 2
    assert (estimate.low, estimate.high) == pytest.approx((0.5 - half, 0.5 + half))
    assert estimate.p_value == pytest.approx(
        2 * 0.5 * math.erfc(0.5 / (np.std(values, ddof=1) / 2) / math.sqrt(2))
    )


def test_ppi_and_the_classical_interval_share_one_variance_convention() -> None:
    # A prediction exact on every labelled unit (rectifier 0): PPI's interval is the classical
    # one of the predictions over the N (ddof 0 would make it sqrt(4/5) as wide).
    f = [0.2, 0.9, 0.4, 0.4, 0.7]
    exact = ppi_mean(f, [0.3, 0.6], [0.3, 0.6])
    assert exact.se == pytest.approx(classical_mean(f).se, rel=1e-15)
    assert (exact.low, exact.high) == pytest.approx((classical_mean(f).low, classical_mean(f).high))
    # And one labelled or one predicted unit is too few for a variance with ddof 1.
    with pytest.raises(ValueError, match="2 labelled units"):
        ppi_mean(f, [0.3], [0.3])
