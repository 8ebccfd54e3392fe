"""What a learned router (`router=learned`) chooses among, and the checks of its settings.

Hard routing (`router.mode=hard`) chooses one strategy per query among `router.candidates`:
an arm alone, `hybrid` (RRF of every arm) or a strategy of the rules config (`bm25_first`,
`exclude_then_fuse`, ...); by default all of them, a strategy that fuses the same arms the same
way as an earlier one counted once. Soft routing (`router.mode=soft`) chooses per query the
per-arm RRF weights over `retriever.arms`: every vector whose weights come from 0, 0.25, 0.5,
0.75, 1 and sum to 1 (5 vectors for two arms, 15 for three), named `rrf_<percent>_<percent>`,
with the parsed exclusions applied first (an exclude strategy's filter: no effect on a query
whose parse excludes nothing).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import product

from retrieval_bench.config.router import RouterConfig
from retrieval_bench.errors import ConfigError, nearest_hint
from retrieval_bench.routing.learned import ESTIMATORS, SETTING, Candidate
from retrieval_bench.routing.rules import RuleSet

MODES = ("hard", "soft")
HYBRID = "hybrid"
# The rules router's choice, recorded beside the candidates (a comparison, not a candidate).
RULES = "rules"
SOFT_STEPS = (0.0, 0.25, 0.5, 0.75, 1.0)


def hybrid(arms: Sequence[str]) -> Candidate:
    """RRF of every arm, equal weights, no exclusions: what a job without a router runs."""
    return Candidate(HYBRID, tuple(arms), "rrf")


def available(rule_set: RuleSet | None, arms: Sequence[str]) -> list[Candidate]:
    """Every strategy hard routing may choose, in order: each arm alone, hybrid, then each
    strategy of the rules' routes (one that fuses the same arms the same way as an earlier one
    is left out)."""
    out = [Candidate(arm, (arm,)) for arm in arms]
    if len(arms) > 1:
        out.append(hybrid(arms))
    seen = {(c.arms, c.combine, c.exclude) for c in out}
    for route in rule_set.routes.values() if rule_set else ():
        s = route.strategy
        key = (s.arms, s.combine if len(s.arms) > 1 else "rrf", s.exclude)
        if key not in seen and s.name not in {c.name for c in out}:
            seen.add(key)
            out.append(Candidate(s.name, s.arms, s.combine, s.exclude))
    return out


def soft_weights(arms: int) -> list[tuple[float, ...]]:
    """Every weight vector over `arms` arms with weights from SOFT_STEPS summing to 1, the
    first arm's weight descending."""
    vectors = [w for w in product(SOFT_STEPS, repeat=arms) if math.isclose(sum(w), 1.0)]
    return sorted(vectors, reverse=True)


def soft_candidates(arms: Sequence[str]) -> list[Candidate]:
    return [
        Candidate(
            "rrf_" + "_".join(str(round(100 * w)) for w in weights),
            tuple(arms),
            "rrf_" + "_".join(str(round(100 * w)) for w in weights),
            exclude=True,
            weights=weights,
        )
        for weights in soft_weights(len(arms))
    ]


def learned_candidates(
    cfg: RouterConfig, rule_set: RuleSet | None, arms: Sequence[str], fused: Sequence[str]
) -> list[Candidate]:
    """The candidates of `cfg` (checked: ConfigError naming the key). `arms`: every arm the job
    builds; `fused`: `retriever.arms`, whose weights soft routing chooses."""
    if cfg.mode not in MODES:
        raise ConfigError("router.mode", f"{cfg.mode!r} is not one of: {', '.join(MODES)}")
    if cfg.mode == "soft":
        if len(fused) < 2:
            raise ConfigError(
                "router.mode",
                f"soft routing weighs the arms of retriever.arms, which has {list(fused)}: "
                "give two arms or more (retriever=hybrid)",
            )
        if cfg.candidates:
            raise ConfigError(
                "router.candidates",
                "is for router.mode=hard; soft routing's candidates are the weight vectors",
            )
        return soft_candidates(fused)
    known = available(rule_set, arms)
    if not cfg.candidates:
        return known
    by_name = {c.name: c for c in known}
    chosen = []
    for i, name in enumerate(cfg.candidates):
        if name not in by_name:
            raise ConfigError(
                f"router.candidates[{i}]",
                f"unknown strategy {name!r}; {nearest_hint(name, list(by_name))}",
            )
        if by_name[name] in chosen:
            raise ConfigError(f"router.candidates[{i}]", f"{name!r} is listed twice")
        chosen.append(by_name[name])
    if len(chosen) < 2:
        raise ConfigError("router.candidates", "a router needs two candidates or more")
    return chosen


def check_learned(
    cfg: RouterConfig, rule_set: RuleSet | None, arms: Sequence[str], fused: Sequence[str]
) -> list[Candidate]:
    """Every key of router=learned (the rules' keys are load_rule_set's); the candidates."""
    candidates = learned_candidates(cfg, rule_set, arms, fused)
    names = [c.name for c in candidates]
    if RULES in names:
        raise ConfigError("router.strategies", f"a strategy may not be named {RULES!r}")
    if cfg.fallback not in (*names, HYBRID):
        raise ConfigError(
            "router.fallback",
            f"unknown strategy {cfg.fallback!r}; {nearest_hint(cfg.fallback, [*names, HYBRID])}",
        )
    if not cfg.estimators:
        raise ConfigError("router.estimators", f"name one model family or more: {ESTIMATORS}")
    for kind, settings in cfg.estimators.items():
        key = f"router.estimators.{kind}"
        if kind not in ESTIMATORS:
            raise ConfigError(key, f"unknown model family; {nearest_hint(kind, ESTIMATORS)}")
        if not settings:
            raise ConfigError(key, f"give the {SETTING[kind]} values to search, or drop it")
        for i, value in enumerate(settings):
            if kind == "ridge" and not (math.isfinite(value) and value > 0):
                raise ConfigError(f"{key}[{i}]", f"alpha must be > 0, got {value}")
            if kind == "forest" and not (value >= 1 and float(value).is_integer()):
                raise ConfigError(
                    f"{key}[{i}]", f"min_samples_leaf must be an integer >= 1, got {value}"
                )
    if not cfg.margins:
        raise ConfigError("router.margins", "give one margin or more (0: any predicted gain)")
    for i, margin in enumerate(cfg.margins):
        if not (math.isfinite(margin) and margin >= 0):
            raise ConfigError(f"router.margins[{i}]", f"must be >= 0, got {margin}")
    return candidates
