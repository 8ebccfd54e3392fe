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
    """At least this many entities of the lexicon in the query."""
    max_entities: Optional[int] = None  # noqa: UP045
    """At most this many entities of the lexicon in the query."""
    excludes: Optional[bool] = None  # noqa: UP045
    """A negation cue excluded at least one entity ("万宁除了日月湾还有什么")."""
    cue: Optional[bool] = None  # noqa: UP045
    """A negation cue is present, whether or not it excluded anything."""
    short: Optional[bool] = None  # noqa: UP045
    """The query is at most `router.short_query_length` characters (punctuation not
    counted)."""


@dataclass
class RuleConfig:
    route: str = ""
    when: ConditionConfig = field(default_factory=ConditionConfig)


@dataclass
class StrategyConfig:
    arms: list[str] = field(default_factory=list)
    combine: str = "rrf"
    """rrf or score: fuse every arm's pool (settings and weights from retriever.*); fill: the
    first arm's pool in order, later arms fill the rest."""
    exclude: bool = False
    """Send the parsed excluded entities to the filter, so no arm ever ranks their passages."""


@dataclass
class RouteConfig:
    strategy: str = ""
    serves: list[str] = field(default_factory=list)
    """Labelled query types this route is meant for; empty means [the route's own name]. The
    default route also serves every type no other reachable route serves."""


@dataclass
class NegationConfig:
    prefix_cues: list[str] = field(default_factory=list)
    """Negation cues that come before what they exclude ("除了", "不要")."""
    suffix_cues: list[str] = field(default_factory=list)
    """Negation cues that come after what they exclude ("以外", "之外")."""
    conjunctions: list[str] = field(default_factory=list)
    """Words that join further excluded entities to the first one ("和", "或")."""
    clause_breaks: list[str] = field(default_factory=list)
    """Characters or words that end a clause: a cue never reaches past one."""
    max_gap: int = 4
    """The most characters between a cue and the entity or city it excludes."""


@dataclass
class RouterConfig:
    name: str = "none"
    """The router option (`router=none|rules|learned`): `none` sends every query to
    `retriever.arms`."""
    rules_file: str = ""
    """A YAML file merged over the keys below (lists replace, mappings merge by key)."""
    default_route: str = "default"
    """The route of a query no rule matches."""
    short_query_length: int = 12
    """The most characters (punctuation not counted) a query may have for the `short` condition
    to hold."""
    negation: NegationConfig = field(default_factory=NegationConfig)
    rules: list[RuleConfig] = field(default_factory=list)
    """Conditions tested in order: the first rule whose `when` holds gives the query its `route`."""
    routes: dict[str, RouteConfig] = field(default_factory=dict)
    """Route name -> its `strategy` and the query types it `serves`."""
    strategies: dict[str, StrategyConfig] = field(default_factory=dict)
    """Strategy name -> the `arms` it searches, how it `combine`s them and whether it `exclude`s
    the parsed entities."""
    tuned_on_evalset: list[str] = field(default_factory=list)
    """Router keys (dotted, e.g. `negation.max_gap`) whose values were chosen by looking at
    results on the evaluation set the job scores; the report then says that the rules router's
    numbers are optimistic. Every threshold not listed is reported as not validated on held-out
    data."""
    ceiling_folds: int = 5
    """The routing ceiling (metrics.json router.ceiling): k-fold cross-validation over the scored
    queries, stratified by labelled type, seeded, for the best fixed strategy per type."""
    ceiling_seed: int = 0
    """Seeds the routing ceiling's folds (and a learned router's)."""

    model: str = ""
    """router=learned: empty: fit a router on this job's labelled queries (held out by fold); a
    saved router (router.json of a finished job) applies it as it is."""
    mode: str = "hard"
    """hard: choose one candidate strategy per query; soft: choose the per-arm RRF weights of
    retriever.arms per query (each arm's weight from 0, .25, .5, .75, 1; the parsed exclusions
    applied, as exclude strategies do)."""
    candidates: list[str] = field(default_factory=list)
    """hard: the strategies it chooses among, by name: an arm (alone), `hybrid` (RRF of every
    arm) or a strategy of `strategies`; empty: every arm, hybrid and every strategy."""
    metric: str = "ndcg@K"
    """What a choice is worth on a query (the target it learns): a per-query measure at K (top_k)
    or at a cut-off the job scores."""
    estimators: dict[str, list[float]] = field(
        default_factory=lambda: {k: list(v) for k, v in DEFAULT_ESTIMATORS.items()}
    )
    """The model families searched (ridge, forest) and each one's settings."""
    margins: list[float] = field(default_factory=lambda: list(DEFAULT_MARGINS))
    """router=learned: the margins by which a model's predicted gain must beat the reference
    strategy's for the router to depart from it (chosen inside the training folds)."""
    fallback: str = "hybrid"
    """The strategy of a query whose features cannot be computed (an arm returned nothing)."""
