"""The built-in combiners, one small module per method as ranx keeps its fusion methods, each a
plug-in named by `combiners.<name>._target_` (config.schema.BUILTIN_COMBINERS):

    rrf    Reciprocal Rank Fusion, optional per-arm weights (rrf.py)
    score  min-max / z-score normalisation, then CombSUM or CombMNZ, weighted (score.py)
    fill   the first arm's pool, later arms fill the rest (fill.py)

A new combiner is one module whose class has `build(name, ctx, weights)` returning an object
with `combine(pools, tie_break)` (which starts with `pools.nothing_to_fuse`, as the pipeline
hands every strategy's pools to its combiner, one arm's or all-empty ones included), plus one
`combiners.<name>` node naming it (protocols.CombinerSpec); nothing here lists it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from retrieval_bench.errors import ConfigError, nearest_hint
from retrieval_bench.fusion.fill import Fill
from retrieval_bench.fusion.rrf import ReciprocalRankFusion
from retrieval_bench.fusion.score import ScoreFusion

if TYPE_CHECKING:
    from retrieval_bench.config import RetrieverConfig

__all__ = [
    "TYPE_FROM_LABEL",
    "TYPE_FROM_ROUTE",
    "TYPE_SOURCES",
    "Fill",
    "ReciprocalRankFusion",
    "ScoreFusion",
    "arm_weights",
    "check_fusion",
    "check_strategy_weights",
    "check_weight_vector",
]


def _known(key: str, value: str, names: Sequence[str]) -> None:
    if value not in names:
        raise ConfigError(key, f"unknown value '{value}'; {nearest_hint(value, names)}")


# Where a query's type comes from, for `retriever.type_weights` (`retriever.type_weights_from`):
# the rules router's route (what a deployed system knows) or the labelled type (an oracle).
TYPE_FROM_ROUTE = "route"
TYPE_FROM_LABEL = "label"
TYPE_SOURCES = (TYPE_FROM_ROUTE, TYPE_FROM_LABEL)


def check_fusion(cfg: RetrieverConfig) -> None:
    """The fusion keys of `retriever`: where a query's type comes from, and weights that fit
    the arms, finite, none negative, one at least positive: `weights` and each vector of
    `type_weights`. Which combiner `retriever.combine` names is the schema's check; each
    combiner's own keys are its node's (`combiners.<name>`), checked when it is built."""
    _known("retriever.type_weights_from", cfg.type_weights_from, TYPE_SOURCES)
    check_weight_vector("retriever.weights", cfg.weights, cfg.arms)
    for key, weights in cfg.type_weights.items():
        if not weights:
            raise ConfigError(
                f"retriever.type_weights.{key}", "is empty: give one weight per arm, or drop it"
            )
        check_weight_vector(f"retriever.type_weights.{key}", weights, cfg.arms)


def check_weight_vector(key: str, weights: Sequence[float], arms: Sequence[str]) -> None:
    """One weight vector for `arms` (empty: all 1): one per arm, >= 0 and finite, one > 0."""
    if not weights:
        return
    if len(weights) != len(arms):
        raise ConfigError(
            key,
            f"{len(weights)} weights for {len(arms)} arms {list(arms)}: give one "
            "weight per arm of retriever.arms, in its order (or none: all 1)",
        )
    for i, weight in enumerate(weights):
        if not math.isfinite(weight) or weight < 0:
            raise ConfigError(f"{key}[{i}]", f"must be >= 0 and finite, got {weight}")
    if not any(weight > 0 for weight in weights):
        raise ConfigError(key, "at least one weight must be positive")


def check_strategy_weights(
    cfg: RetrieverConfig, strategies: Mapping[str, tuple[str, Sequence[str]]]
) -> None:
    """With `retriever.weights` (or `type_weights`), each router strategy that fuses with
    weights (name -> (combine, arms)) must fuse the arms of `retriever.arms` in that order: the
    job builds one combiner per combine name, for those arms. Refused naming
    `retriever.weights` otherwise."""
    if not cfg.weights and not cfg.type_weights:
        return
    for name, (combine, arms) in strategies.items():
        if combine != "fill" and len(arms) > 1 and list(arms) != list(cfg.arms):
            raise ConfigError(
                "retriever.weights",
                f"router strategy '{name}' fuses {list(arms)}, but the weights are for "
                f"retriever.arms {list(cfg.arms)}: fuse the same arms in the same order, or "
                "give no weights",
            )


def arm_weights(cfg: RetrieverConfig, arms: Sequence[str]) -> tuple[float, ...] | None:
    """The weight of each of `arms`, read from `retriever.weights` by the arm's position in
    `retriever.arms` (so a router strategy over some of the arms keeps their weights); None
    when no weights were given."""
    if not cfg.weights:
        return None
    missing = [arm for arm in arms if arm not in cfg.arms]
    if missing:
        raise ConfigError(
            "retriever.weights",
            f"no weight for arm {missing[0]!r}: weights follow retriever.arms {list(cfg.arms)}",
        )
    return tuple(float(cfg.weights[list(cfg.arms).index(arm)]) for arm in arms)
