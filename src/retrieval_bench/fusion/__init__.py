"""The combiners, found by the name `retriever.combine` (and a router strategy's `combine`)
gives them: one small module per method, as ranx keeps its fusion methods.

    rrf    Reciprocal Rank Fusion, optional per-arm weights (rrf.py)
    score  min-max / z-score normalisation, then CombSUM or CombMNZ, weighted (score.py)
    fill   the first arm's pool, later arms fill the rest (fill.py)

This module and the ones it imports need only numpy, so the config schema can import it to
check names and weights. A new combiner is one module whose class has
`from_config(cfg, weights)` and `combine(pools, tie_break)` (which starts with
`pools.nothing_to_fuse`, as the pipeline hands every strategy's pools to its combiner, one arm's
or all-empty ones included), plus one line in COMBINERS.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from retrieval_bench.errors import ConfigError, nearest_hint
from retrieval_bench.fusion.fill import Fill
from retrieval_bench.fusion.rrf import ReciprocalRankFusion
from retrieval_bench.fusion.score import METHODS, NORMALIZATIONS, ScoreFusion

if TYPE_CHECKING:
    from retrieval_bench.config import RetrieverConfig
    from retrieval_bench.protocols import Combiner

__all__ = [
    "COMBINERS",
    "Fill",
    "ReciprocalRankFusion",
    "ScoreFusion",
    "arm_weights",
    "build_combiner",
    "check_combine",
    "check_fusion",
    "check_strategy_weights",
]


# combine name -> the combiner built from the retriever config and one weight per arm (None:
# no weights given).
COMBINERS: dict[str, Callable[[RetrieverConfig, tuple[float, ...] | None], Combiner]] = {
    "rrf": ReciprocalRankFusion.from_config,
    "score": ScoreFusion.from_config,
    "fill": Fill.from_config,
}


def _known(key: str, value: str, names: Sequence[str]) -> None:
    if value not in names:
        raise ConfigError(key, f"unknown value '{value}'; {nearest_hint(value, names)}")


def check_combine(key: str, name: str) -> None:
    """A combiner name (`retriever.combine`, a router strategy's `combine`) must be known; a
    typo is answered with the nearest name."""
    _known(key, name, list(COMBINERS))


def check_fusion(cfg: RetrieverConfig) -> None:
    """The fusion keys of `retriever`: known names (each typo answered with the nearest), and
    weights that fit the arms, finite, none negative, one at least positive."""
    check_combine("retriever.combine", cfg.combine)
    _known("retriever.normalize", cfg.normalize, list(NORMALIZATIONS))
    _known("retriever.method", cfg.method, METHODS)
    if not cfg.weights:
        return
    if len(cfg.weights) != len(cfg.arms):
        raise ConfigError(
            "retriever.weights",
            f"{len(cfg.weights)} weights for {len(cfg.arms)} arms {list(cfg.arms)}: give one "
            "weight per arm of retriever.arms, in its order (or none: all 1)",
        )
    for i, weight in enumerate(cfg.weights):
        if not math.isfinite(weight) or weight < 0:
            raise ConfigError(f"retriever.weights[{i}]", f"must be >= 0 and finite, got {weight}")
    if not any(weight > 0 for weight in cfg.weights):
        raise ConfigError("retriever.weights", "at least one weight must be positive")


def check_strategy_weights(
    cfg: RetrieverConfig, strategies: Mapping[str, tuple[str, Sequence[str]]]
) -> None:
    """With `retriever.weights`, each router strategy that fuses with weights (name ->
    (combine, arms)) must fuse the arms of `retriever.arms` in that order: the job builds one
    combiner per combine name, for those arms. Refused naming `retriever.weights` otherwise."""
    if not cfg.weights:
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


def build_combiner(
    cfg: RetrieverConfig, combine: str | None = None, arms: Sequence[str] | None = None
) -> Combiner:
    """The combiner named `combine` (default `retriever.combine`) for the pools of `arms`, in
    that order (default `retriever.arms`), built from the retriever config.

    A router strategy passes its own `combine` and `arms`; the arms' weights still come from
    `retriever.weights`. Raises ConfigError naming the key when the config does not fit."""
    check_fusion(cfg)
    name = cfg.combine if combine is None else combine
    check_combine("retriever.combine", name)
    chosen = list(cfg.arms) if arms is None else list(arms)
    return COMBINERS[name](cfg, arm_weights(cfg, chosen))
