"""Everything a job's config must satisfy before any work, in one call: the schema's own checks
(`config.validate`), then what needs an implementation to answer: the measures that plug-ins
register, the metric names compare and the gate use, the group-by fields, the fusion settings and
the router's rules. The app and the library (`api.compose`, `api.evaluate`) call it; the first bad
key raises ConfigError naming it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from retrieval_bench.config import RunConfig, validate
from retrieval_bench.encoders import check_encoder_config
from retrieval_bench.errors import ConfigError, nearest_hint
from retrieval_bench.fusion import TYPE_FROM_ROUTE, check_fusion, check_strategy_weights
from retrieval_bench.job.assemble import job_arm_names
from retrieval_bench.job.build import arm_spec, combiner_spec, stage_specs
from retrieval_bench.job.learned import learned_metric
from retrieval_bench.protocols import StageSpec
from retrieval_bench.routing.candidates import check_learned
from retrieval_bench.routing.rules import LEARNED, load_rule_set
from retrieval_bench.scoring.groups import check_field
from retrieval_bench.scoring.measure_names import (
    canonical_benchmark_metrics,
    canonical_compare_metrics,
    canonical_robustness_metrics,
)
from retrieval_bench.scoring.registry import load_plugins


def check_config(
    cfg: RunConfig,
    given_arms: Sequence[str] = (),
    given_stages: Mapping[str, StageSpec] | None = None,
    given_combiners: Sequence[str] = (),
) -> None:
    """Refuse the first bad key of `cfg` (ConfigError). `given_arms`, `given_combiners`: names
    a library caller passes as objects (not under `arms`, `combiners`); `given_stages`: the
    stage specs it passes, placed among the configured ones. Metric names are rewritten in
    place to the project's spelling (`nDCG@10` -> `ndcg@10`)."""
    validate(cfg, given_arms, given_combiners)
    # First: the measures plugins register are names compare and the gate may use.
    load_plugins(cfg.scoring.plugins, "scoring.plugins")
    canonical_compare_metrics(cfg.compare)
    canonical_robustness_metrics(cfg.robustness)
    canonical_benchmark_metrics(cfg.benchmark)
    check_fusion(cfg.retriever)
    check_encoder_config(cfg.encoder)
    for name in cfg.scoring.group_by:
        check_field(name)
    # router=rules: its rules, routes, strategies and cues
    rule_set = load_rule_set(
        cfg.router, (*cfg.arms, *given_arms), (*cfg.combiners, *given_combiners)
    )
    if cfg.router.name == LEARNED:  # its candidates, settings and metric
        check_learned(cfg.router, rule_set, job_arm_names(cfg, rule_set), cfg.retriever.arms)
        learned_metric(cfg)
    if cfg.retriever.type_weights and cfg.retriever.type_weights_from == TYPE_FROM_ROUTE:
        routes = list(rule_set.routes) if rule_set is not None else []
        if not routes:
            raise ConfigError(
                "retriever.type_weights_from",
                "route: a query's route comes from the rules router; add router=rules, or set "
                "retriever.type_weights_from=label for an oracle study (the labelled type, "
                "which no deployed system knows)",
            )
        for key in cfg.retriever.type_weights:
            if key not in routes:
                raise ConfigError(
                    f"retriever.type_weights.{key}",
                    f"is not a route of the rules router; {nearest_hint(key, routes)}",
                )
    if rule_set is not None:
        check_strategy_weights(
            cfg.retriever,
            {
                r.strategy.name: (r.strategy.combine, r.strategy.arms)
                for r in rule_set.routes.values()
            },
        )
    # Every plug-in node the job will build names a class that takes its keywords (the arms a
    # caller passes as objects are theirs to check).
    stage_specs(cfg, given_stages)
    combine_names = {cfg.retriever.combine}
    if rule_set is not None:
        combine_names.update(route.strategy.combine for route in rule_set.routes.values())
    for name in sorted(combine_names - set(given_combiners)):
        combiner_spec(name, cfg.combiners[name])
    for name in cfg.retriever.arms:
        if name not in given_arms:
            arm_spec(name, cfg.arms[name])
