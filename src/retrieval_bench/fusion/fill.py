"""Fill: the first arm's pool in its order, then each later arm's passages not seen yet, in
theirs. Scores are the rank-derived 1 / (k + position), position from 1, so the list stays
score-descending as a TREC run needs. Weights play no part."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from retrieval_bench.fusion.pools import RRF_K, check_rank_constant, nothing_to_fuse
from retrieval_bench.records import Ranked
from retrieval_bench.tiebreak import TieBreak

if TYPE_CHECKING:
    from retrieval_bench.protocols import BuildContext


@dataclass(frozen=True)
class Fill:
    """`combiners.fill`: its keyword argument is `k` (config.fusion.FillConfig; the shipped
    node follows `combiners.rrf.k`)."""

    k: int = RRF_K

    def __post_init__(self) -> None:
        check_rank_constant("k", self.k)

    def build(self, name: str, ctx: BuildContext, weights: tuple[float, ...] | None) -> Fill:
        """Weights play no part in fill."""
        return self

    def combine(self, pools: Sequence[Ranked], tie_break: TieBreak) -> Ranked:
        """The order is the arms' own, so the tie-break has nothing left to decide (the
        scores are strictly decreasing)."""
        trivial = nothing_to_fuse(pools)
        if trivial is not None:
            return trivial
        seen: dict[int, None] = {}
        for pool in pools:
            for index in pool.indices.tolist():
                seen.setdefault(index, None)
        indices = np.fromiter(seen, dtype=np.int64, count=len(seen))
        scores = 1.0 / (self.k + np.arange(1, len(indices) + 1, dtype=np.float64))
        return Ranked(indices=indices, scores=scores, requested=len(indices))
