"""The percentile bootstrap of each configuration's rank among many (the tiers' rank intervals,
`stats.tiers`).

`rank_resamples` resamples of the group's paired queries with replacement (numpy
`default_rng(seed)`, the same stream for every group), the competition rank of each resample's
means (1 + the configurations with a strictly better mean, so equal means share a rank), and its
(1 - confidence) / 2 and 1 - (1 - confidence) / 2 quantiles (inverted CDF: ranks that occurred).
The interval is each configuration's own, not simultaneous over them. Resampling queries, not
configurations, keeps the pairing: every configuration's mean in a resample is over the same
queries.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# Means closer than this are equal for the rank bootstrap (float sums of equal values).
_MEAN_TOLERANCE = 1e-12
# Resampled values held at once (configurations x resamples x queries).
_CHUNK_ELEMENTS = 1 << 22


def competition_ranks(means: np.ndarray, lower_is_better: bool = False) -> np.ndarray:
    """Rank of each row's mean per column (1 + the rows with a strictly better mean);
    `means`: configurations x resamples."""
    signed = -means if lower_is_better else means
    better = signed[None, :, :] > signed[:, None, :] + _MEAN_TOLERANCE
    return 1 + better.sum(axis=1)


def rank_intervals(
    arrays: Sequence[np.ndarray],
    n_resamples: int,
    seed: int,
    confidence: float,
    lower_is_better: bool = False,
) -> list[tuple[int, int, int]]:
    """(observed rank, low, high) of each configuration's paired values `arrays` (one array per
    configuration, the same queries in the same order): the percentile bootstrap of the module
    docstring."""
    values = np.vstack([np.asarray(a, dtype=np.float64) for a in arrays])
    k, n = values.shape
    observed = competition_ranks(values.mean(axis=1)[:, None], lower_is_better)[:, 0]
    rng = np.random.default_rng(seed)
    rows = max(1, _CHUNK_ELEMENTS // max(1, k * n))
    parts = []
    for start in range(0, n_resamples, rows):
        size = min(rows, n_resamples - start)
        picks = rng.integers(0, n, size=(size, n))
        parts.append(competition_ranks(values[:, picks].mean(axis=2), lower_is_better))
    ranks = np.concatenate(parts, axis=1)
    tail = (1.0 - confidence) / 2.0
    low = np.quantile(ranks, tail, axis=1, method="inverted_cdf")
    high = np.quantile(ranks, 1.0 - tail, axis=1, method="inverted_cdf")
    return [(int(o), int(lo), int(hi)) for o, lo, hi in zip(observed, low, high, strict=True)]
