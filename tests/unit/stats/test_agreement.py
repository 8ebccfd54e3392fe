"""Agreement between raters (`stats.agreement`) against an independent reference: Cohen's kappa
(plain, linear and quadratic weights) against scikit-learn's `cohen_kappa_score`, the confusion
matrix, and too few pairs left unestimated."""

from __future__ import annotations

import numpy as np
import pytest
from support.references import cohen_kappa_score

from retrieval_bench.stats.agreement import agreement, cohen_kappa, confusion, kappa_note


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
