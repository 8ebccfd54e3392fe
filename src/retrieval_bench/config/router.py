"""The router's typed schema (`router.*`, `conf/router/`): rules (conditions tested in order) pick
a route, a route names the strategy that answers it. `routing.rules` turns it into a validated
`RuleSet`. `router=learned` adds the keys of a router learned from labelled queries
(`routing.learned`, `job.learned`); it keeps the rules, whose parse it reads and whose router
it is compared with."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

# router=learned: the model families searched and each one's settings (ridge's alpha, the
# forest's min_samples_leaf); the margins a departure from the reference must exceed.
DEFAULT_ESTIMATORS = {"ridge": [1.0, 10.0, 100.0, 1000.0], "forest": [3.0, 10.0, 30.0]}
DEFAULT_MARGINS = [0.0, 0.01, 0.03, 0.1]


@dataclass
class ConditionConfig:
    """Conditions of one rule; every one that is set must hold, a null one is not tested."""

    min_entities: Optional[int] = None  # noqa: UP045 (OmegaConf needs typing.Optional)
    max_entities: Optional[int] = None  # noqa: UP045
    # A negation cue excluded at least one entity ("万宁除了日月湾还有什么").
    excludes: Optional[bool] = None  # noqa: UP045
    # A negation cue is present, whether or not it excluded anything.
    cue: Optional[bool] = None  # noqa: UP045
    # The query is at most `router.short_query_length` characters (punctuation not counted).
    short: Optional[bool] = None  # noqa: UP045


@dataclass
class RuleConfig:
    route: str = ""
    when: ConditionConfig = field(default_factory=ConditionConfig)


@dataclass
class StrategyConfig:
    arms: list[str] = field(default_factory=list)
    # rrf or score: fuse every arm's pool (settings and weights from retriever.*); fill: the
    # first arm's pool in order, later arms fill the rest.
    combine: str = "rrf"
    # Send the parsed excluded entities to the filter, so no arm ever ranks their passages.
    exclude: bool = False


@dataclass
class RouteConfig:
    strategy: str = ""
    # Labelled query types this route is meant for; empty means [the route's own name]. The
    # default route also serves every type no other reachable route serves.
    serves: list[str] = field(default_factory=list)


@dataclass
class NegationConfig:
    prefix_cues: list[str] = field(default_factory=list)
    suffix_cues: list[str] = field(default_factory=list)
    conjunctions: list[str] = field(default_factory=list)
    clause_breaks: list[str] = field(default_factory=list)
    max_gap: int = 4


@dataclass
class RouterConfig:
    name: str = "none"
    # A YAML file merged over the keys below (lists replace, mappings merge by key).
    rules_file: str = ""
    default_route: str = "default"
    short_query_length: int = 12
    negation: NegationConfig = field(default_factory=NegationConfig)
    rules: list[RuleConfig] = field(default_factory=list)
    routes: dict[str, RouteConfig] = field(default_factory=dict)
    strategies: dict[str, StrategyConfig] = field(default_factory=dict)
    # Router keys (dotted, e.g. `negation.max_gap`) whose values were chosen by looking at
    # results on the evaluation set the job scores; the report then says that the rules
    # router's numbers are optimistic. Every threshold not listed is reported as not validated
    # on held-out data.
    tuned_on_evalset: list[str] = field(default_factory=list)
    # The routing ceiling (metrics.json router.ceiling): k-fold cross-validation over the
    # scored queries, stratified by labelled type, seeded, for the best fixed strategy per type.
    ceiling_folds: int = 5
    ceiling_seed: int = 0

    # router=learned (routing.learned). The ceiling's folds and seed above are also the folds
    # its held-out estimate routes by: each fold's queries by a model fitted on the others.
    # A saved router (router.json of a finished job) to apply; empty: learn from this job's
    # labelled queries.
    model: str = ""
    # hard: choose one candidate strategy per query; soft: choose the per-arm RRF weights of
    # retriever.arms per query (each arm's weight from 0, .25, .5, .75, 1; the parsed exclusions
    # applied, as exclude strategies do).
    mode: str = "hard"
    # hard: the strategies it chooses among, by name: an arm (alone), `hybrid` (RRF of every
    # arm) or a strategy of `strategies`; empty: every arm, hybrid and every strategy.
    candidates: list[str] = field(default_factory=list)
    # What a choice is worth on a query (the target it learns): a per-query measure at K (top_k)
    # or at a cut-off the job scores.
    metric: str = "ndcg@K"
    # The model families searched (ridge, forest) and each one's settings.
    estimators: dict[str, list[float]] = field(
        default_factory=lambda: {k: list(v) for k, v in DEFAULT_ESTIMATORS.items()}
    )
    margins: list[float] = field(default_factory=lambda: list(DEFAULT_MARGINS))
    # The strategy of a query whose features cannot be computed (an arm returned nothing).
    fallback: str = "hybrid"
