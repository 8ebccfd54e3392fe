"""The rank bootstrap (`stats.bootstrap`): competition ranks share equal means, and the vectorised
percentile bootstrap equals a plain loop over the same seeded draws."""

from __future__ import annotations

import numpy as np

from retrieval_bench.stats.bootstrap import competition_ranks, rank_intervals


def test_competition_ranks_share_equal_means() -> None:
    means = np.array([[0.5, 0.2], [0.5, 0.9], [0.1, 0.9]])
    assert competition_ranks(means).tolist() == [[1, 3], [1, 1], [3, 1]]
    assert competition_ranks(means, lower_is_better=True).tolist() == [[2, 1], [2, 2], [1, 2]]


def test_rank_intervals_are_the_seeded_percentile_bootstrap() -> None:
    """The vectorised bootstrap equals a plain loop over the same draws of default_rng(seed)."""
    rng = np.random.default_rng(7)
    arrays = [rng.random(20) + shift for shift in (0.0, 0.05, 0.3)]
    got = rank_intervals(arrays, 500, seed=3, confidence=0.9)
    draws = np.random.default_rng(3).integers(0, 20, size=(500, 20))
    ranks = np.array(
        [[1 + sum(a[d].mean() > x[d].mean() for a in arrays) for x in arrays] for d in draws]
    )
    expected = [
        (
            1 + sum(a.mean() > x.mean() for a in arrays),
            int(np.quantile(ranks[:, i], 0.05, method="inverted_cdf")),
            int(np.quantile(ranks[:, i], 0.95, method="inverted_cdf")),
        )
        for i, x in enumerate(arrays)
    ]
    assert got == expected
    assert got == rank_intervals(arrays, 500, seed=3, confidence=0.9)  # reproducible
    assert got[2] == (1, 1, 1)  # far ahead on every resample


def test_two_systems_that_trade_queries_share_the_rank_interval() -> None:
    """X = [1, 0], Y = [0, 1]: a resample draws (0, 0) (X first), (1, 1) (Y first) or a mix
    (a tie: both rank 1), so each is rank 1 with probability 3/4 and rank 2 with 1/4."""
    got = rank_intervals([np.array([1.0, 0.0]), np.array([0.0, 1.0])], 2000, 0, 0.95)
    assert got == [(1, 1, 2), (1, 1, 2)]


def test_rank_intervals_are_two_sided() -> None:
    """Two systems on 20 queries whose order flips in 7.95% of 2000 resamples: the first
    (ahead) ranks 2nd there, the second 1st. A 90% interval leaves 5% in each tail, so 2 (more
    than 5%) is inside the first's interval and 1 inside the second's; a one-sided 10% tail
    would cut them off."""
    rng = np.random.default_rng(7)
    arrays = [rng.random(20) + shift for shift in (0.0, 0.1)]
    draws = np.random.default_rng(0).integers(0, 20, size=(2000, 20))
    behind = np.mean([arrays[0][d].mean() < arrays[1][d].mean() for d in draws])
    assert 0.05 < behind < 0.10
    assert rank_intervals(arrays, 2000, seed=0, confidence=0.9) == [(1, 1, 2), (2, 1, 2)]
