"""What a job builds between its config and its first query, in one place: the BuildContext, the
arms it needs, the query parser, and the Pipeline (router, combiners, per-type combiners,
stages). `run_job` assembles a job with these, and a tuning replay (`retrieval_bench.tune`)
assembles each trial with the same functions, so a replayed trial runs the job's own code."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

from retrieval_bench.config import RunConfig
from retrieval_bench.errors import ConfigError, nearest_hint
from retrieval_bench.fusion import TYPE_FROM_LABEL
from retrieval_bench.job.build import build_combiners
from retrieval_bench.job.filters import PassageFilter
from retrieval_bench.job.learned import LearnedRouting
from retrieval_bench.job.pipeline import BaselineStrategy, Pipeline, TypeOf
from retrieval_bench.paths import resolve_output
from retrieval_bench.protocols import Arm, BuildContext, Combiner, CombinerSpec, Stage
from retrieval_bench.records import Dataset, ParsedQuery
from retrieval_bench.routing.parser import NegationRules, QueryParser
from retrieval_bench.routing.router import build_router
from retrieval_bench.routing.rules import RuleSet, Strategy
from retrieval_bench.tiebreak import shared_tie_break


def configured_strategy(cfg: RunConfig) -> Strategy:
    """The strategy of `retriever.*`: every query's without a router, the fallback with one."""
    return Strategy(
        name=cfg.retriever.name, arms=tuple(cfg.retriever.arms), combine=cfg.retriever.combine
    )


def job_arm_names(cfg: RunConfig, rule_set: RuleSet | None) -> list[str]:
    """The arms a job builds: `retriever.arms`, and with a router every arm a strategy names
    (each also runs alone as a baseline for the routed-vs-single comparison)."""
    names = list(cfg.retriever.arms)
    if rule_set:
        for served in rule_set.routes.values():
            names.extend(a for a in served.strategy.arms if a not in names)
    return names


def build_context(
    cfg: RunConfig, dataset: Dataset, rule_set: RuleSet | None, passage_filter: PassageFilter
) -> BuildContext:
    """What every plug-in of the job is built against."""
    return BuildContext(
        passages=dataset.passages,
        queries=dataset.queries,
        cfg=cfg,
        tie_break=shared_tie_break([p.id for p in dataset.passages]),
        cache_dir=resolve_output(cfg.cache_dir),
        entities=dataset.entities,
        possible_filters=passage_filter.possible(dataset.queries, exclusions=rule_set is not None),
    )


def build_parser(dataset: Dataset, rule_set: RuleSet | None) -> QueryParser:
    """The query parser: the corpus's cities, the dataset's entities, the router's cues."""
    cities = {str(p.meta.get("city")) for p in dataset.passages if p.meta.get("city")}
    return QueryParser(
        cities, dataset.entities, rule_set.negation if rule_set else NegationRules()
    )


def type_source(cfg: RunConfig, dataset: Dataset) -> TypeOf | None:
    """Where a query's type comes from for `retriever.type_weights` (None: no type weights).
    A labelled type the evaluation set does not have is refused naming its key (a route name
    was checked with the router's config: job.check)."""
    if not cfg.retriever.type_weights:
        return None
    if cfg.retriever.type_weights_from != TYPE_FROM_LABEL:
        return lambda query, route: route
    types = sorted({q.query_type for q in dataset.queries})
    for key in cfg.retriever.type_weights:
        if key not in types:
            raise ConfigError(
                f"retriever.type_weights.{key}",
                f"is not a query type of dataset '{dataset.name}'; {nearest_hint(key, types)}",
            )
    return lambda query, route: query.query_type


def build_pipeline(
    cfg: RunConfig,
    dataset: Dataset,
    arms: Mapping[str, Arm],
    stages: Sequence[tuple[str, Stage]],
    ctx: BuildContext,
    rule_set: RuleSet | None,
    passage_filter: PassageFilter,
    parse: Callable[[str], ParsedQuery] | None = None,
    before_cut: Collection[str] = (),
    learned: LearnedRouting | None = None,
    combiners: Mapping[str, Combiner | CombinerSpec] | None = None,
) -> Pipeline:
    """The job's pipeline over built `arms` and `stages`: its router and baselines, the
    combiners every strategy names (and each query type's own, with `retriever.type_weights`).
    `parse` defaults to a fresh `build_parser`; `before_cut`: the stages placed before the top_k
    cut (`job.build.before_cut`). With a learned router, the pipeline searches for it (every
    arm, its candidates and comparisons as the baselines); the job then chooses each query's
    strategy (`LearnedRouting.select`) and finishes it. `combiners`: a library caller's own,
    by name (job.build.build_combiners)."""
    route, rule_baselines = build_router(rule_set, configured_strategy(cfg), list(arms))
    baselines: dict[str, BaselineStrategy] = dict(rule_baselines)
    extra: dict[str, Combiner] = {}
    names = {cfg.retriever.combine, *(s.combine for s in rule_baselines.values())}
    if learned is not None:
        route, baselines, extra = learned.presearch, learned.baselines(), learned.combiners(ctx)
        names.update(s.combine for s in learned.strategies.values() if s.combine not in extra)
        names.add(learned.plain.combine)
    if rule_set:
        names.update(served.strategy.combine for served in rule_set.routes.values())
    combine_names = sorted(names)
    typed = {
        key: build_combiners(
            cfg, combine_names, ctx, tuple(float(w) for w in weights), combiners
        )
        for key, weights in cfg.retriever.type_weights.items()
    }
    return Pipeline(
        dataset.passages,
        arms,
        parse=parse or build_parser(dataset, rule_set).parse,
        passage_filter=passage_filter,
        route=route,
        pool_size=cfg.retriever.pool_size,
        top_k=cfg.top_k,
        combiners={**build_combiners(cfg, combine_names, ctx, None, combiners), **extra},
        baselines=baselines,
        stages=stages,
        typed_combiners=typed,
        type_of=type_source(cfg, dataset),
        before_cut=before_cut,
    )
