"""The one ranking order used everywhere: score descending, then passage id descending (the
order trec_eval imposes), so a TREC export scores the same in trec_eval as here."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np


class TieBreak:
    """Score descending, then passage id descending: the order trec_eval imposes.

    `id_order[i]` is passage i's position among all ids sorted ascending, so ties can be broken
    with integer keys instead of string comparisons.
    """

    def __init__(self, ids: Sequence[str]) -> None:
        order = np.argsort(np.asarray(ids, dtype=object), kind="stable")
        self.id_order = np.empty(len(ids), dtype=np.int64)
        self.id_order[order] = np.arange(len(ids))

    def top(
        self, candidates: np.ndarray, scores: np.ndarray, k: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """The best k of `candidates` (indices) given their `scores`, in the canonical order."""
        if k > 0 and len(candidates) > max(8 * k, 4096):
            # Exact pre-filter for long candidate lists (BM25 matches most of a corpus): the
            # k-th largest of 8k block maxima is k distinct scores, so at least k candidates
            # score >= it and every member of the top k (ties included) survives the cut.
            block = len(scores) // (8 * k)
            maxima = scores[: 8 * k * block].reshape(8 * k, block).max(axis=1)
            if len(scores) > 8 * k * block:
                maxima = np.append(maxima, scores[8 * k * block :].max())
            floor = np.partition(maxima, len(maxima) - k)[len(maxima) - k]
            keep = scores >= floor
            candidates, scores = candidates[keep], scores[keep]
        if len(candidates) > k:
            # Keep everything tied with the k-th best so the tie-break decides who stays.
            kth = np.partition(-scores, k - 1)[k - 1]
            keep = -scores <= kth
            candidates, scores = candidates[keep], scores[keep]
        order = np.lexsort((-self.id_order[candidates], -scores))[:k]
        return candidates[order], scores[order]


@lru_cache(maxsize=4)
def _tie_break_for(ids: tuple[str, ...]) -> TieBreak:
    return TieBreak(ids)


def shared_tie_break(ids: Sequence[str]) -> TieBreak:
    """The one TieBreak for a corpus: the pipeline and every arm of a job (and every job of a
    multirun) order the same ids, and building one sorts every id (about 1 s at 1M passages)."""
    return _tie_break_for(tuple(ids))
