"""What every combiner does alike: pass a lone pool through, say why nothing came back, sum
per passage the arms' contributions, and order the union with the project tie-break."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from retrieval_bench.config.fusion import RRF_K, check_rank_constant
from retrieval_bench.records import NO_CANDIDATES, Ranked
from retrieval_bench.tiebreak import TieBreak

__all__ = [
    "RRF_K",
    "check_rank_constant",
    "check_weights",
    "nothing_to_fuse",
    "ranked_union",
    "union_sums",
]


def nothing_to_fuse(pools: Sequence[Ranked]) -> Ranked | None:
    """The combination when there is nothing to fuse, else None.

    One pool is its own combination (a single-arm strategy keeps its arm's scores and
    `requested`); pools that all came back empty combine to an empty ranking whose
    `empty_reason` joins theirs (`no_query_terms+filtered_out`), so the report says why."""
    if not pools:
        raise ValueError("a combiner needs at least one pool")
    if len(pools) == 1:
        return pools[0]
    if not any(pool.returned for pool in pools):
        reasons = dict.fromkeys(pool.empty_reason or NO_CANDIDATES for pool in pools)
        return replace(pools[0], requested=0, empty_reason="+".join(reasons))
    return None


def union_sums(
    pools: Sequence[Ranked], *contributions: Sequence[np.ndarray]
) -> tuple[np.ndarray, list[np.ndarray]]:
    """The pools' union (ascending passage index) and, for each set of contributions given,
    the per-passage sum (`set[i][j]` belongs to `pools[i].indices[j]`).

    The sum runs from 0.0 in arm order (np.bincount adds in input order), the order ranx's
    CombSUM, CombMNZ, wsum and RRF add in, so equal contributions give ranx's sums bit for bit."""
    indices = np.concatenate([pool.indices for pool in pools])
    union, inverse = np.unique(indices, return_inverse=True)
    sums = [
        np.bincount(inverse, weights=np.concatenate(values), minlength=len(union))
        for values in contributions
    ]
    return union, sums


def ranked_union(union: np.ndarray, scores: np.ndarray, tie_break: TieBreak) -> Ranked:
    """The whole union best first (score descending, then id descending); `requested` is the
    union's size, as fusion asks for no cut (the pipeline cuts to top_k afterwards)."""
    ordered, ordered_scores = tie_break.top(union, scores, len(union))
    return Ranked(indices=ordered, scores=ordered_scores, requested=len(union))


def check_weights(weights: tuple[float, ...] | None, pools: Sequence[Ranked]) -> tuple[float, ...]:
    """One weight per pool (all 1 when none were given); a mismatch is a wiring bug, as the
    config's weights were checked against its arms when the combiner was built."""
    if weights is None:
        return (1.0,) * len(pools)
    if len(weights) != len(pools):
        raise ValueError(f"{len(weights)} weights for {len(pools)} pools")
    return weights
