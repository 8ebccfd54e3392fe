"""Reciprocal Rank Fusion (Cormack et al., SIGIR 2009), with optional per-arm weights:
score(d) = sum over the arms whose pool holds d of w_arm / (k + rank_arm(d)), rank from 1.

With every weight 1 this is ranx's `rrf` (`fuse(..., norm=None, method="rrf")`) to the bit.
The rank is the passage's position in its arm's pool, which the arm ordered with the project
tie-break (score descending, then id descending); ranx re-sorts each run by score with an
unstable sort, so among tied scores its ranks may differ from these."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from retrieval_bench.fusion.pools import (
    RRF_K,
    check_rank_constant,
    check_weights,
    nothing_to_fuse,
    ranked_union,
    union_sums,
)
from retrieval_bench.records import Ranked
from retrieval_bench.tiebreak import TieBreak

if TYPE_CHECKING:
    from retrieval_bench.protocols import BuildContext


@dataclass(frozen=True)
class ReciprocalRankFusion:
    """`combiners.rrf`: its keyword argument is `k` (config.fusion.RRFConfig;
    `combiners.rrf20: {_target_: ...ReciprocalRankFusion, k: 20}` is a second RRF)."""

    k: int = RRF_K
    # One per pool, in pool order; None: all 1 (plain RRF). The job's `retriever.weights`,
    # handed to `build`: no node sets it (config.fusion.RRFConfig has no such key).
    weights: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        check_rank_constant("k", self.k)

    def build(
        self, name: str, ctx: BuildContext, weights: tuple[float, ...] | None
    ) -> ReciprocalRankFusion:
        return replace(self, weights=weights)

    def combine(self, pools: Sequence[Ranked], tie_break: TieBreak) -> Ranked:
        """Every candidate of every pool, fused (no cut)."""
        trivial = nothing_to_fuse(pools)
        if trivial is not None:
            return trivial
        weights = check_weights(self.weights, pools)
        contributions = [
            weight / (self.k + np.arange(1, pool.returned + 1, dtype=np.float64))
            for pool, weight in zip(pools, weights, strict=True)
        ]
        union, (scores,) = union_sums(pools, contributions)
        return ranked_union(union, scores, tie_break)
