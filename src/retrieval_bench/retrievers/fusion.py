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


class RRF:
    """`retriever.combine=rrf`: reciprocal_rank_fusion with the configured `rrf_k`."""

    def __init__(self, k: int) -> None:
        self.k = k

    def combine(self, pools: Sequence[Ranked], tie_break: TieBreak) -> Ranked:
        return reciprocal_rank_fusion(pools, self.k, tie_break)


class Fill:
    """`retriever.combine=fill`: the first arm leads; later arms add unseen passages after it.
    Scores are the rank-derived 1/(k + position) so the list stays score-descending as TREC
    needs."""

    def __init__(self, k: int) -> None:
        self.k = k

    def combine(self, pools: Sequence[Ranked], tie_break: TieBreak) -> Ranked:
        seen: dict[int, None] = {}
        for pool in pools:
            for index in pool.indices.tolist():
                seen.setdefault(index, None)
        indices = np.fromiter(seen, dtype=np.int64, count=len(seen))
        scores = 1.0 / (self.k + np.arange(1, len(indices) + 1, dtype=np.float64))
        return Ranked(indices=indices, scores=scores, requested=len(indices))


# `retriever.combine` (and a router strategy's `combine`) -> its combiner, given rrf_k.
COMBINERS: dict[str, type[RRF] | type[Fill]] = {"rrf": RRF, "fill": Fill}


def build_combiner(name: str, rrf_k: int) -> RRF | Fill:
    return COMBINERS[name](rrf_k)
