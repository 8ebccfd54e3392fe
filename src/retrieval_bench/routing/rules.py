"""The router's config: its typed schema (`router.*` in `conf/router/`), an optional rules file,
and the start-up checks that turn it into a validated `RuleSet`.

Three layers, each named once: a *rule* (conditions on the parse, tested in order) picks a
*route*; a route names the *strategy* that answers it (arms, how they combine, whether the
parsed exclusions go to the filter) and the labelled query types it is meant to serve, which is
what the router's accuracy is measured against.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, NamedTuple

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException

from retrieval_bench.config.router import ConditionConfig, RouterConfig
from retrieval_bench.config.schema import BUILTIN_COMBINERS
from retrieval_bench.errors import ConfigError, DataError, nearest_hint
from retrieval_bench.paths import resolve_path
from retrieval_bench.routing.parser import NegationRules

ROUTER_NAMES = ("none", "rules", "learned")
LEARNED = "learned"
# The rule recorded for a query no rule matched.
DEFAULT_RULE = "default"


@dataclass(frozen=True)
class Strategy:
    """How one query is answered: which arms, and how their pools become one list.

    `combine` names the combiner (retrievers.fusion: `rrf` fuses all pools; `fill` keeps the
    first arm's pool in order and lets later arms fill the places it leaves empty). `exclude`
    sends the parsed excluded entities to the filter, so no arm ever ranks their passages (a
    strategy without it ignores exclusions).
    """

    name: str
    arms: tuple[str, ...]
    combine: str = "rrf"
    exclude: bool = False


class Routing(NamedTuple):
    """A router's answer for one query: the route (None without a router), its strategy, and
    the rule that chose it, recorded so every routing decision can be explained."""

    route: str | None
    strategy: Strategy
    rule: str | None = None


CONDITIONS = tuple(f.name for f in fields(ConditionConfig))


@dataclass(frozen=True)
class Rule:
    route: str
    when: dict[str, int | bool]  # only the conditions that are set

    def describe(self) -> str:
        return describe_when(self.when)


def describe_when(when: Mapping[str, object]) -> str:
    """A rule's conditions as written in rankings.jsonl and the report: `min_entities=2, ...`."""
    return ", ".join(f"{key}={str(v).lower()}" for key, v in when.items())


@dataclass(frozen=True)
class Route:
    name: str
    strategy: Strategy
    serves: tuple[str, ...]


@dataclass(frozen=True)
class RuleSet:
    """A validated router: rules in order, the default route, and each route's strategy."""

    source: str
    rules: tuple[Rule, ...]
    default_route: str
    short_query_length: int
    routes: dict[str, Route]
    negation: NegationRules
    # Keys declared tuned on the evaluation set (`router.tuned_on_evalset`) -> value in use.
    tuned: dict[str, Any] = field(default_factory=dict)
    ceiling_folds: int = 5
    ceiling_seed: int = 0

    def thresholds(self) -> dict[str, int]:
        """The numeric settings the rules depend on, as `router.*` keys -> value in use."""
        return {
            "short_query_length": self.short_query_length,
            "negation.max_gap": self.negation.max_gap,
        }

    def reachable(self) -> list[str]:
        """Routes some rule (or the default) can send a query to, in rule order."""
        return list(dict.fromkeys([*(r.route for r in self.rules), self.default_route]))


class _Fail:
    """Raises the right error for where the value came from: a config key or a rules file."""

    def __init__(self, path: Path | None) -> None:
        self.path = path

    def __call__(self, key: str, message: str) -> ConfigError | DataError:
        if self.path is None:
            return ConfigError(f"router.{key}", message)
        return DataError(self.path, f"{key}: {message}")


def _merge_file(cfg: RouterConfig, path: Path) -> RouterConfig:
    if not path.is_file():
        raise ConfigError("router.rules_file", f"no such file: {path}")
    try:
        raw = OmegaConf.load(path)
    except Exception as exc:  # yaml errors come in several types
        raise DataError(path, f"not valid YAML: {exc}") from exc
    if not isinstance(raw, DictConfig):
        raise DataError(path, "a rules file must be a mapping of router keys")
    for key in ("name", "rules_file"):
        if key in raw:
            raise DataError(path, f"{key}: set on the command line, not in a rules file")
    try:
        merged = OmegaConf.merge(OmegaConf.structured(cfg), raw)
        result = OmegaConf.to_object(merged)
    except OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", "") or "?"
        message = str(getattr(exc, "msg", exc)).splitlines()[0]
        schema = getattr(exc, "object_type", None)
        if isinstance(exc, ConfigKeyError) and is_dataclass(schema):
            parent, _, leaf = key.rpartition(".")
            known = [f.name for f in fields(schema)]
            message += f"; {nearest_hint(leaf, known, f'{parent}.' if parent else '')}"
        raise DataError(path, f"{key}: {message}") from exc
    assert isinstance(result, RouterConfig)
    return result


def _strings(values: list[str], key: str, fail: _Fail) -> tuple[str, ...]:
    for i, value in enumerate(values):
        if not value or not value.strip():
            raise fail(f"{key}[{i}]", "an empty string is not allowed")
    return tuple(values)


def load_rule_set(
    cfg: RouterConfig,
    known_arms: tuple[str, ...],
    known_combiners: tuple[str, ...] = tuple(BUILTIN_COMBINERS),
) -> RuleSet | None:
    """The validated rule set for `router=rules` (and `router=learned`, which keeps the rules),
    None for `router=none`; the first bad entry raises ConfigError naming its key, or DataError
    naming the rules file and the entry.
    `known_arms` / `known_combiners`: the `arms.<name>` / `combiners.<name>` nodes of the job."""
    if cfg.name not in ROUTER_NAMES:
        raise ConfigError("router.name", f"'{cfg.name}' is not one of: {', '.join(ROUTER_NAMES)}")
    if cfg.model and cfg.name != LEARNED:
        raise ConfigError("router.model", "a saved router is only read with router=learned")
    if cfg.name == "none":
        if cfg.rules_file:
            raise ConfigError("router.rules_file", "is only read with router=rules")
        return None
    path = resolve_path(cfg.rules_file) if cfg.rules_file else None
    if path is not None:
        cfg = _merge_file(cfg, path)
    fail = _Fail(path)

    if cfg.short_query_length < 1:
        raise fail(
            "short_query_length", f"must be a positive integer, got {cfg.short_query_length}"
        )
    if cfg.negation.max_gap < 0:
        raise fail("negation.max_gap", f"must be >= 0, got {cfg.negation.max_gap}")
    if cfg.ceiling_folds < 2:
        raise fail("ceiling_folds", f"must be at least 2, got {cfg.ceiling_folds}")
    tuned = _tuned_settings(cfg, fail)
    if not cfg.strategies:
        raise fail("strategies", "router=rules needs at least one strategy")
    strategies: dict[str, Strategy] = {}
    for name, spec in cfg.strategies.items():
        key = f"strategies.{name}"
        if not spec.arms:
            raise fail(f"{key}.arms", "needs at least one arm")
        for i, arm in enumerate(spec.arms):
            if arm not in known_arms:
                raise fail(
                    f"{key}.arms[{i}]", f"unknown arm '{arm}' (arms: {', '.join(known_arms)})"
                )
        if len(set(spec.arms)) != len(spec.arms):
            raise fail(f"{key}.arms", f"an arm is listed twice: {list(spec.arms)}")
        if spec.combine not in known_combiners:
            hint = nearest_hint(spec.combine, list(known_combiners))
            raise fail(f"{key}.combine", f"unknown combiner '{spec.combine}'; {hint}")
        strategies[name] = Strategy(name, tuple(spec.arms), spec.combine, spec.exclude)

    if not cfg.routes:
        raise fail("routes", "router=rules needs at least one route")
    routes: dict[str, Route] = {}
    for name, route in cfg.routes.items():
        if route.strategy not in strategies:
            raise fail(
                f"routes.{name}.strategy",
                f"unknown strategy '{route.strategy}' (strategies: {', '.join(strategies)})",
            )
        serves = _strings(route.serves, f"routes.{name}.serves", fail) or (name,)
        routes[name] = Route(name, strategies[route.strategy], serves)
    known_routes = ", ".join(routes)
    if cfg.default_route not in routes:
        raise fail("default_route", f"unknown route '{cfg.default_route}' (routes: {known_routes})")

    rules: list[Rule] = []
    for i, rule in enumerate(cfg.rules):
        key = f"rules[{i}]"
        if rule.route not in routes:
            raise fail(f"{key}.route", f"unknown route '{rule.route}' (routes: {known_routes})")
        when = {c: getattr(rule.when, c) for c in CONDITIONS if getattr(rule.when, c) is not None}
        if not when:
            raise fail(f"{key}.when", "no condition set (the default route is the catch-all)")
        for bound in ("min_entities", "max_entities"):
            if bound in when and int(when[bound]) < 0:
                raise fail(f"{key}.when.{bound}", f"must be >= 0, got {when[bound]}")
        if int(when.get("min_entities", 0)) > int(when.get("max_entities", 1 << 30)):
            raise fail(f"{key}.when", "min_entities is above max_entities: no query can match")
        rules.append(Rule(rule.route, when))

    neg = cfg.negation
    for cue_list in ("prefix_cues", "suffix_cues", "conjunctions", "clause_breaks"):
        _strings(getattr(neg, cue_list), f"negation.{cue_list}", fail)
    testing = [i for i, r in enumerate(rules) if {"excludes", "cue"} & r.when.keys()]
    if testing and not neg.prefix_cues:
        raise fail(
            "negation.prefix_cues",
            f"is empty, but rules[{testing[0]}] tests negation: list the cue words",
        )
    return RuleSet(
        source=str(path) if path else "config",
        rules=tuple(rules),
        default_route=cfg.default_route,
        short_query_length=cfg.short_query_length,
        routes=routes,
        negation=NegationRules(
            prefix_cues=tuple(neg.prefix_cues),
            suffix_cues=tuple(neg.suffix_cues),
            conjunctions=tuple(neg.conjunctions),
            clause_breaks=tuple(neg.clause_breaks),
            max_gap=neg.max_gap,
        ),
        tuned=tuned,
        ceiling_folds=cfg.ceiling_folds,
        ceiling_seed=cfg.ceiling_seed,
    )


def _tuned_settings(cfg: RouterConfig, fail: _Fail) -> dict[str, Any]:
    """Each key of `tuned_on_evalset` -> its value in `cfg`; an unknown key is refused with
    the nearest known one, so a typo cannot hide a tuned setting."""
    tree = OmegaConf.to_container(OmegaConf.structured(cfg))
    assert isinstance(tree, dict)
    out: dict[str, Any] = {}
    for i, key in enumerate(cfg.tuned_on_evalset):
        node: Any = tree
        walked: list[str] = []
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                known = list(node) if isinstance(node, dict) else []
                where = ".".join(walked)
                hint = (
                    nearest_hint(part, known, f"{where}." if where else "")
                    if known
                    else f"'{where}' has no sub-keys"
                )
                raise fail(f"tuned_on_evalset[{i}]", f"unknown router key '{key}'; {hint}")
            node = node[part]
            walked.append(part)
        out[key] = node
    return out
