"""How often people call a pair relevant, given what the judge said about it: the model the plan
predicts people's labels with.

A pair falls in a cell by the judge's grade (on the evaluation set's scale: relevant or not),
by its rank among its query's pooled pairs when they are ordered by the judge's own score (a
cross-encoder's or a similarity judge's score; a chat judge's 0-3 grade), ranks 1, 2, 3 and 4+
(`RANKS`: a judge's absolute score rarely means the same from one query to the next, while the
passage it prefers among a query's candidates often is the relevant one; ties share the better
rank), and by the best rank the compared systems gave it, 1, 2-3 and 4+ (`SYSTEM_RANKS`: what
every system put first is relevant more often than what one put tenth).

The share of relevant pairs in a cell is estimated from every pair whose people's label is
known and which the judge graded, shrunk towards the share in its grade (and that one towards
the share over every pair) with `PRIOR` pseudo-pairs, so a cell with few pairs borrows from its
neighbours (a beta-binomial posterior mean):

    p_grade = (relevant_grade + PRIOR * p_all) / (pairs_grade + PRIOR)
    p_cell  = (relevant_cell + PRIOR * p_grade) / (pairs_cell + PRIOR)

with p_all = (relevant + 0.5) / (pairs + 1). Counts may carry leading axes (one calibration per
draw of a simulation).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

RANKS = 4
# Buckets of the best rank the compared systems gave a pair: 1, 2-3, 4 and below.
SYSTEM_RANK_EDGES = (1, 3)
SYSTEM_RANKS = len(SYSTEM_RANK_EDGES) + 1
PRIOR = 2.0


def score_ranks(pair_query: ArrayLike, score: ArrayLike) -> np.ndarray:
    """Each pair's 0-based rank among its query's pairs by `score`, best first; ties share the
    better rank."""
    q = np.asarray(pair_query, dtype=np.int64)
    s = np.asarray(score, dtype=np.float64)
    order = np.lexsort((-s, q))
    sorted_q, sorted_s = q[order], s[order]
    position = np.arange(len(q))
    start = np.zeros(len(q), dtype=np.int64)
    if len(q):
        new_query = np.r_[True, sorted_q[1:] != sorted_q[:-1]]
        start = np.maximum.accumulate(np.where(new_query, position, 0))
        new_value = np.r_[True, (sorted_s[1:] != sorted_s[:-1]) | new_query[1:]]
        tie_start = np.maximum.accumulate(np.where(new_value, position, 0))
        ranks = tie_start - start
    else:
        ranks = position
    out = np.empty(len(q), dtype=np.int64)
    out[order] = ranks
    return out


def cells(relevant_grade: ArrayLike, judge_rank: ArrayLike, best_rank: ArrayLike) -> np.ndarray:
    """Each pair's cell (module docstring): judged relevant (0/1) x the judge's rank bucket x
    the systems' best-rank bucket; ranks 0-based."""
    g = np.asarray(relevant_grade, dtype=np.int64)
    j = np.minimum(np.asarray(judge_rank, dtype=np.int64), RANKS - 1)
    b = np.searchsorted(SYSTEM_RANK_EDGES, np.asarray(best_rank, dtype=np.int64), side="right")
    return (g * RANKS + j) * SYSTEM_RANKS + b


N_CELLS = 2 * RANKS * SYSTEM_RANKS


def probabilities(relevant: ArrayLike, pairs: ArrayLike) -> np.ndarray:
    """P(people call a pair relevant) per cell from the counts per cell (last axis, `N_CELLS`),
    shrunk as the module docstring says."""
    rel = np.asarray(relevant, dtype=np.float64)
    n = np.asarray(pairs, dtype=np.float64)
    p_all = (rel.sum(axis=-1, keepdims=True) + 0.5) / (n.sum(axis=-1, keepdims=True) + 1.0)
    shape = (*rel.shape[:-1], 2, RANKS * SYSTEM_RANKS)
    rel_g, n_g = rel.reshape(shape), n.reshape(shape)
    p_grade = (rel_g.sum(axis=-1, keepdims=True) + PRIOR * p_all[..., None]) / (
        n_g.sum(axis=-1, keepdims=True) + PRIOR
    )
    p_cell = (rel_g + PRIOR * p_grade) / (n_g + PRIOR)
    return p_cell.reshape(rel.shape)


def cell_counts(
    pair_cell: ArrayLike, relevant: ArrayLike, labelled: ArrayLike
) -> tuple[np.ndarray, np.ndarray]:
    """(relevant, pairs) per cell over the pairs `labelled` marks (last axis: pairs; leading
    axes kept)."""
    c = np.asarray(pair_cell, dtype=np.int64)
    r = np.asarray(relevant, dtype=np.float64)
    m = np.asarray(labelled, dtype=np.float64)
    onehot = np.zeros((len(c), N_CELLS))
    onehot[np.arange(len(c)), c] = 1.0
    return (m * r) @ onehot, m @ onehot
