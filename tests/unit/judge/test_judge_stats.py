"""The judge's statistics against independent references: Cohen's kappa (plain, linear and
quadratic weights) against scikit-learn's `cohen_kappa_score`, and the prediction-powered mean
against the published formula (Angelopoulos et al., Science 2023) worked by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from support.references import cohen_kappa_score

from retrieval_bench.scoring.agreement import agreement, cohen_kappa, confusion, kappa_note
from retrieval_bench.scoring.ppi import classical_mean, ppi_mean


@pytest.mark.parametrize("weights", ["none", "linear", "quadratic"])
@pytest.mark.parametrize("scale", [(0, 1), (0, 1, 2, 3)])
@pytest.mark.parametrize("seed", range(4))
def test_kappa_equals_scikit_learn(weights: str, scale: tuple[int, ...], seed: int) -> None:
    rng = np.random.default_rng(seed)
    people = rng.choice(scale, size=80).tolist()
    # A judge that mostly agrees, sometimes one grade off, never using the top grade (so a
    # grade of the scale is missing from one rater: the scale, not the data, sets the weights).
    judge = [
        min(max(g + int(rng.choice([-1, 0, 0, 1])), 0), max(scale) - (len(scale) > 2))
        for g in people
    ]
    expected = cohen_kappa_score(
        people, judge, labels=list(scale), weights=None if weights == "none" else weights
    )
    assert cohen_kappa(people, judge, scale, weights) == pytest.approx(expected, abs=1e-12)


def test_kappa_of_perfect_and_chance_agreement() -> None:
    assert cohen_kappa([0, 1, 1, 0], [0, 1, 1, 0], (0, 1)) == 1.0
    # Both raters give one grade to everything: chance agreement is perfect, kappa undefined.
    assert cohen_kappa([1, 1, 1], [1, 1, 1], (0, 1)) is None
    # People gave one grade only: kappa is 0 whatever the judge does, so it is not reported.
    assert cohen_kappa([1, 1, 1, 1], [1, 0, 1, 0], (0, 1)) == 0.0
    assert "people gave every pair grade 1" in str(kappa_note([1, 1, 1, 1], [1, 0, 1, 0]))


def test_confusion_rows_people_columns_judge() -> None:
    assert confusion([0, 1, 1], [2, 3, 3], (0, 1, 2, 3)).tolist() == [
        [0, 0, 1, 0],
        [0, 0, 0, 2],
        [0, 0, 0, 0],
        [0, 0, 0, 0],
    ]
    with pytest.raises(ValueError, match="outside the scale"):
        confusion([0, 4], [0, 1], (0, 1, 2, 3))


def test_agreement_below_30_pairs_is_not_estimated() -> None:
    few = agreement([0, 1] * 14, [0, 1] * 14, (0, 1))
    assert few.kappa is None and few.note == "not estimated: 28 labelled pairs (fewer than 30)"
    enough = agreement([0, 1] * 15, [0, 1] * 15, (0, 1))
    assert enough.kappa == 1.0 and enough.note is None


def test_ppi_interval_is_the_published_formula_on_a_hand_case() -> None:
    """theta = mean_N(f) - mean_n(f - Y); CI theta +/- z sqrt(var_N(f)/N + var_n(f - Y)/n),
    the variances over N and n (Angelopoulos et al. 2023, mean estimation)."""
    f_unlabelled = [1.0, 0.0, 1.0, 1.0]  # N = 4: mean 3/4, variance 3/16
    f_labelled = [1.0, 0.0, 1.0]  # n = 3
    y = [1.0, 1.0, 0.0]  # f - Y = 0, -1, 1: mean 0, variance 2/3
    theta = 3 / 4 - 0
    se = math.sqrt((3 / 16) / 4 + (2 / 3) / 3)
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
