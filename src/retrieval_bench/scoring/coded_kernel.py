"""The integer scorer's pass over the rankings, compiled (`_coded.c`), where it is built.

`metrics.build_ranked_grades_coded` calls `match_rows`; None means "take the numpy path", which
gives the same arrays (tests/unit/scoring/test_scoring_coded.py runs both). The compiled pass
checks each ranking for duplicate codes and early padding, counts its length within k and finds
its labels in its top k, reading each ranked code once; in numpy these are four passes over the
whole matrix with their temporaries, two thirds of scoring a job's full measure set.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from retrieval_bench.compiled import extension


def _kernel() -> Any:
    return extension("scoring._coded")


def kernel_available() -> bool:
    return _kernel() is not None


def match_rows(
    rankings: np.ndarray, sorted_ids: np.ndarray, k: int, check: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, int] | None:
    """(lengths within k, row, rank, label column of every labelled code in a top k ordered by
    (row, rank), first row holding a code twice, first row with padding before a code; -1:
    none, and both -1 without `check`), or None for the numpy path. `sorted_ids` holds each
    row's label codes ascending (padding first)."""
    kernel = _kernel()
    if kernel is None:
        return None
    n, depth = rankings.shape
    width = sorted_ids.shape[1]
    codes = np.ascontiguousarray(rankings, dtype=np.int64)
    ids = np.ascontiguousarray(sorted_ids, dtype=np.int64)
    lengths = np.empty(n, dtype=np.int64)
    row, rank, column = (np.empty(n * width, dtype=np.int64) for _ in range(3))
    matches, duplicate, padding = kernel.match_rows(
        codes, depth, ids, width, k, check, lengths, row, rank, column
    )
    if matches < 0:
        return None
    return lengths, row[:matches], rank[:matches], column[:matches], duplicate, padding
