"""Score fusion (Fox and Shaw, TREC 1993): normalise each arm's scores over its own pool, per
query, then combine them per passage.

    none:    n(s) = s
    minmax:  n(s) = (s - min) / max(max - min, 1e-9)          (ranx: "min-max")
    zscore:  n(s) = (s - mean) / max(std, 1e-9), std over n    (ranx: "zmuv")

    combsum: score(d) = sum_i w_i * n_i(d)                     (ranx: comb_sum; weighted: wsum)
    combmnz: score(d) = m(d) * sum_i w_i * n_i(d)              (ranx: comb_mnz)

The sums run over the arms whose pool holds d (an arm without d adds 0, as in ranx), and m(d)
counts those arms among the ones with a positive weight. Each definition is ranx 0.3.21's:
the 1e-9 floor means a pool whose scores are all equal (a pool of one passage included)
normalises to 0 under minmax and zscore, as it carries no score information; CombMNZ still
counts it. Where this differs from ranx: weighted CombMNZ multiplies the weighted sum by the
count, so a weight scales its arm's scores as in CombSUM, whereas ranx's `wmnz` multiplies the
unweighted sum by the sum of the present arms' weights; and an arm of weight 0 has no say at
all (it adds nothing and is not counted). With every weight 1 both agree with ranx."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from retrieval_bench.config.fusion import METHODS, ScoreFusionConfig
from retrieval_bench.fusion.pools import check_weights, nothing_to_fuse, ranked_union, union_sums
from retrieval_bench.records import Ranked
from retrieval_bench.tiebreak import TieBreak

if TYPE_CHECKING:
    from retrieval_bench.protocols import BuildContext

# ranx's floor on the min-max range and the standard deviation (a constant pool -> 0).
FLOOR = 1e-9


def _none(scores: np.ndarray) -> np.ndarray:
    return scores


def _minmax(scores: np.ndarray) -> np.ndarray:
    low = scores.min()
    return (scores - low) / max(scores.max() - low, FLOOR)


def _zscore(scores: np.ndarray) -> np.ndarray:
    return (scores - scores.mean()) / max(scores.std(), FLOOR)


NORMALIZATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "none": _none,
    "minmax": _minmax,
    "zscore": _zscore,
}
__all__ = ["METHODS", "NORMALIZATIONS", "ScoreFusion"]


@dataclass(frozen=True)
class ScoreFusion:
    """`combiners.score`: its keyword arguments are `normalize` and `method`
    (config.fusion.ScoreFusionConfig)."""

    normalize: str = "minmax"
    method: str = "combsum"
    # One per pool, in pool order; None: all 1. The job's `retriever.weights`, handed to
    # `build`: no node sets it.
    weights: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        ScoreFusionConfig(self.normalize, self.method).validate()

    def build(self, name: str, ctx: BuildContext, weights: tuple[float, ...] | None) -> ScoreFusion:
        return replace(self, weights=weights)

    def combine(self, pools: Sequence[Ranked], tie_break: TieBreak) -> Ranked:
        """Every candidate of every pool, fused (no cut)."""
        trivial = nothing_to_fuse(pools)
        if trivial is not None:
            return trivial
        weights = check_weights(self.weights, pools)
        normalize = NORMALIZATIONS[self.normalize]
        contributions = [
            weight * normalize(pool.scores) if pool.returned else pool.scores
            for pool, weight in zip(pools, weights, strict=True)
        ]
        if self.method == "combsum":
            union, (scores,) = union_sums(pools, contributions)
        else:
            # m(d): how many arms of positive weight returned d.
            counted = [
                np.full(pool.returned, float(w > 0)) for pool, w in zip(pools, weights, strict=True)
            ]
            union, (sums, counts) = union_sums(pools, contributions, counted)
            scores = sums * counts
        return ranked_union(union, scores, tie_break)
