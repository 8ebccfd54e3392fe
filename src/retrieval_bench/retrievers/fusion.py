"""Reciprocal Rank Fusion: score(d) = sum over arms of 1 / (k + rank_arm(d)), rank from 1."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from retrieval_bench.retrievers.base import Ranked, TieBreak


def reciprocal_rank_fusion(pools: Sequence[Ranked], k: int, tie_break: TieBreak) -> Ranked:
    """Fuse every candidate of every pool (no cut: the pipeline cuts to top_k afterwards)."""
    fused: dict[int, float] = {}
    for pool in pools:
        for rank, index in enumerate(pool.indices.tolist(), start=1):
            fused[index] = fused.get(index, 0.0) + 1.0 / (k + rank)
    indices = np.fromiter(fused.keys(), dtype=np.int64, count=len(fused))
    scores = np.fromiter(fused.values(), dtype=np.float64, count=len(fused))
    ordered, ordered_scores = tie_break.top(indices, scores, len(indices))
    return Ranked(indices=ordered, scores=ordered_scores, requested=len(indices))
