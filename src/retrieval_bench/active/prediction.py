"""What the judge predicts each query's metric to be, and how far people's labels may move it.

Three views of a query's metric per system (`compared.Compared.values`), each with the labels
people gave outside the pool (`known`) as they are:

* `judged_values`: the pooled pairs labelled by the judge's grades (relevant from grade 1 on
  the evaluation set's scale); a pair it did not grade counts as not relevant. What the existing
  prediction-powered estimate uses, and a plan's prediction when no calibration exists yet.
* `drawn_values`: `draws` Monte Carlo draws of the pooled pairs' labels, each pair relevant
  with its calibrated probability (`calibration`), independently; their mean over draws is the
  judge's expected metric (the prediction once a calibration exists) and their spread around
  it the predicted size of the error that people's labels will correct, query by query.
* `swings`: each pair's own effect, the metric when it alone is relevant: where the compared
  systems rank it differently the difference moves, whatever the judge says (the
  disagreement strategy's weight).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from retrieval_bench.active.compared import Compared


def _with_known(
    compared: Compared, pool_grades: np.ndarray, known: Sequence[Mapping[str, int]] | None
) -> tuple[np.ndarray, np.ndarray]:
    """(codes, grades) of the pooled pairs with `pool_grades` (N, widest pool), beside the
    known labels of passages outside the pool."""
    pool = compared.pool_layout()
    if known is None or not any(known):
        return pool, pool_grades
    codes, grades = compared.label_layout(known, skip_pooled=True)
    return np.concatenate([pool, codes], axis=1), np.concatenate([pool_grades, grades], axis=1)


def _pool_grades(compared: Compared, pair_grades: np.ndarray) -> np.ndarray:
    """Pair values laid out in `pool_layout`'s (N, widest pool) shape (0 in the padding)."""
    pool = compared.pool_layout()
    out = np.zeros(pool.shape)
    out[compared.pair_query, compared.pair_slot] = pair_grades
    return out


def judged_values(
    compared: Compared,
    metric: str,
    k: int,
    pair_relevant: np.ndarray,
    known: Sequence[Mapping[str, int]] | None = None,
) -> np.ndarray:
    """(S, N) the metric with each pooled pair relevant where `pair_relevant` (0/1 per pair)."""
    grades = _pool_grades(compared, np.asarray(pair_relevant, dtype=np.float64))
    codes, grades = _with_known(compared, grades, known)
    return compared.values(metric, k, codes, grades)


def drawn_values(
    compared: Compared,
    metric: str,
    k: int,
    pair_probability: np.ndarray,
    rng: np.random.Generator,
    draws: int,
    known: Sequence[Mapping[str, int]] | None = None,
) -> np.ndarray:
    """(draws, S, N) the metric under `draws` independent draws of the pooled pairs' labels
    (pair j relevant with `pair_probability[j]`)."""
    p = np.asarray(pair_probability, dtype=np.float64)
    relevant = rng.random((draws, len(p))) < p
    codes, _ = _with_known(compared, _pool_grades(compared, p), known)
    width_pool = compared.pool_layout().shape[1]
    _, fixed = _with_known(compared, np.zeros((compared.n, width_pool)), known)
    stacked = np.empty((draws * compared.n, codes.shape[1]))
    for d in range(draws):
        block = fixed.copy()
        block[compared.pair_query, compared.pair_slot] = relevant[d]
        stacked[d * compared.n : (d + 1) * compared.n] = block
    rows = np.tile(np.arange(compared.n), draws)
    values = compared.values(metric, k, np.tile(codes, (draws, 1)), stacked, rows)
    return values.reshape(len(compared.systems), draws, compared.n).transpose(1, 0, 2)


def swings(compared: Compared, metric: str, k: int) -> np.ndarray:
    """(S, P) each system's metric on the pair's query when that pair alone is relevant."""
    codes = compared.pair_code[:, None]
    grades = np.ones((len(codes), 1))
    return compared.values(metric, k, codes, grades, rows=compared.pair_query)


def disagreement(compared: Compared, metric: str, k: int, contrast: np.ndarray) -> np.ndarray:
    """Per query, the sum over its pooled pairs of |contrast . swing|: how much the compared
    difference (`contrast`, one weight per system, e.g. [1, -1]) can move by one pair's label."""
    moved = np.abs(np.asarray(contrast, dtype=np.float64) @ swings(compared, metric, k))
    return np.bincount(compared.pair_query, weights=moved, minlength=compared.n)


def no_pool(compared: Compared) -> np.ndarray:
    """Queries with no pooled pair (nothing for people to label there)."""
    return compared.pairs_per_query == 0
