"""`active.calibration`: ranks within a query, cells, and the shrunk shares computed by hand."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval_bench.active.calibration import (
    N_CELLS,
    PRIOR,
    RANKS,
    SYSTEM_RANKS,
    cell_counts,
    cells,
    probabilities,
    score_ranks,
)


def test_ranks_are_per_query_best_first_and_ties_share_the_better_rank() -> None:
    query = [0, 0, 0, 1, 1, 0]
    score = [0.2, 0.9, 0.2, 0.1, 0.5, 0.95]
    assert score_ranks(query, score).tolist() == [2, 1, 2, 1, 0, 0]


def test_cells_combine_the_grade_the_judge_s_rank_and_the_systems_best_rank() -> None:
    # judged relevant, judge's rank 7 (bucket 3), systems' best rank 0 (bucket 0)
    assert cells([1], [7], [0]).tolist() == [(1 * RANKS + 3) * SYSTEM_RANKS + 0]
    # not judged relevant, rank 1, best rank 2 (bucket 1: ranks 2-3), best rank 3 (bucket 2)
    assert cells([0, 0], [1, 1], [2, 3]).tolist() == [SYSTEM_RANKS + 1, SYSTEM_RANKS + 2]
    assert cells([1], [9], [9]).max() < N_CELLS


def test_probabilities_shrink_each_cell_towards_its_grade_and_the_whole() -> None:
    pair_cell = np.array([0, 0, 1, N_CELLS - 1])
    relevant = np.array([1.0, 0.0, 1.0, 1.0])
    labelled = np.array([1.0, 1.0, 1.0, 0.0])  # the last pair is not labelled: not counted
    rel, n = cell_counts(pair_cell, relevant, labelled)
    assert rel[:2].tolist() == [1.0, 1.0] and n[:2].tolist() == [2.0, 1.0] and n.sum() == 3
    p = probabilities(rel, n)
    p_all = (2 + 0.5) / (3 + 1)
    p_grade0 = (2 + PRIOR * p_all) / (3 + PRIOR)  # every labelled pair is in grade 0's cells
    assert p[0] == pytest.approx((1 + PRIOR * p_grade0) / (2 + PRIOR))
    assert p[1] == pytest.approx((1 + PRIOR * p_grade0) / (1 + PRIOR))
    assert p[5] == pytest.approx(p_grade0)  # an empty cell: its grade's share
    p_grade1 = PRIOR * p_all / PRIOR
    assert p[N_CELLS - 1] == pytest.approx(p_grade1)


def test_counts_keep_leading_axes_for_one_calibration_per_draw() -> None:
    pair_cell = np.array([0, 1, 1])
    relevant = np.array([1.0, 0.0, 1.0])
    labelled = np.array([[1, 1, 1], [0, 1, 0]], dtype=float)
    rel, n = cell_counts(pair_cell, relevant, labelled)
    assert rel.shape == (2, N_CELLS) and n[1].sum() == 1
    assert probabilities(rel, n).shape == (2, N_CELLS)
