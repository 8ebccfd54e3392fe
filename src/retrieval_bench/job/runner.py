"""One job, as data flows: load -> build arms -> run the pipeline -> score -> write outputs."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from retrieval_bench.config import RunConfig, check_corpus_size
from retrieval_bench.config.schema import DOC
from retrieval_bench.data.loader import load_dataset
from retrieval_bench.encoders import build_encoder
from retrieval_bench.encoders.cache import CacheStats, EmbeddingCache
from retrieval_bench.encoders.shards import encode_shard, shard_bounds
from retrieval_bench.io.folders import writable_dir
from retrieval_bench.job.assemble import (
    build_context,
    build_pipeline,
    configured_strategy,
    job_arm_names,
    type_source,
)
from retrieval_bench.job.build import (
    active_stages,
    arm_specs,
    before_cut,
    build_arms,
    build_stages,
    run_checks,
)
from retrieval_bench.job.contract import applies_own_acl
from retrieval_bench.job.cost import job_cost
from retrieval_bench.job.filters import PassageFilter
from retrieval_bench.job.latency import probe_latency
from retrieval_bench.job.learned import LearnedRouting
from retrieval_bench.job.machine import MemoryMeter, machine
from retrieval_bench.job.pipeline import Pipeline
from retrieval_bench.job.result import JobResult
from retrieval_bench.paths import resolve_output, resolve_path
from retrieval_bench.perturb.dataset import with_variants
from retrieval_bench.plugins import checked_info
from retrieval_bench.protocols import Arm, ArmSpec, Combiner, CombinerSpec, StageSpec
from retrieval_bench.records import Dataset, QueryRecord, empty_rankings, passage_text
from retrieval_bench.routing.learned_metrics import LearnedOutcome, learned_metrics
from retrieval_bench.routing.metrics import router_metrics
from retrieval_bench.routing.rules import LEARNED, RuleSet, load_rule_set
from retrieval_bench.scoring.aggregate import CodedLabels
from retrieval_bench.scoring.families import ScoringContext
from retrieval_bench.scoring.groups import build_group_by
from retrieval_bench.scoring.labels import Judgements
from retrieval_bench.scoring.records import score_records, stage_names
from retrieval_bench.scoring.refusal import check_stage
from retrieval_bench.scoring.robustness import job_robustness, variant_rows
from retrieval_bench.scoring.units import judge_in_unit, passage_docs
from retrieval_bench.stats.settings import significance_settings

log = logging.getLogger(__name__)


class _Timer:
    def __init__(self) -> None:
        self.timings: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.timings[name] = round(self.timings.get(name, 0.0) + time.perf_counter() - start, 4)


CACHE_SUBDIRS = ("tokens", "embeddings")


def load_configured(cfg: RunConfig) -> Dataset:
    """The configured dataset, validated, with the config checks that need its size."""
    dataset = load_dataset(
        cfg.dataset.format,
        cfg.dataset.name,
        resolve_path(cfg.dataset.corpus),
        resolve_path(cfg.dataset.evalset),
        resolve_path(cfg.dataset.path) if cfg.dataset.path else Path(),
        cfg.dataset.split,
    )
    check_corpus_size(cfg, len(dataset.passages), dataset.name)
    if cfg.encoder.shards > 1:
        shard_bounds(len(dataset.passages), cfg.encoder.shards)  # refuses shards > passages
    return dataset


def run_job(
    cfg: RunConfig,
    dataset: Dataset | None = None,
    arms: Mapping[str, Arm | ArmSpec] | None = None,
    stages: Mapping[str, StageSpec] | None = None,
    combiners: Mapping[str, Combiner | CombinerSpec] | None = None,
) -> JobResult:
    """One job: `cfg`'s dataset (or `dataset`, records built by the caller) through the
    pipeline, every stage recorded and scored. `arms` adds arms by name beside `cfg.arms`
    (ready Arm objects, or specs built against the corpus); `retriever.arms` picks among both.
    `stages` adds stage specs by name beside `cfg.stages` (each runs where its placement, or its
    `after` attribute, puts it); `combiners` adds combiners by name beside `cfg.combiners` (a
    ready Combiner, or a CombinerSpec), which `retriever.combine` or a strategy may name."""
    writable_dir(resolve_output(cfg.cache_dir), "cache_dir", CACHE_SUBDIRS)  # before any work
    timer = _Timer()
    memory = MemoryMeter()
    with timer.phase("load"):
        dataset, judgements, groups = load_labelled(cfg, dataset)
    rule_set = load_rule_set(
        cfg.router, (*cfg.arms, *(arms or {})), (*cfg.combiners, *(combiners or {}))
    )
    arm_names = job_arm_names(cfg, rule_set)
    passage_filter = PassageFilter(dataset.passages, cfg.filters)
    ctx = build_context(cfg, dataset, rule_set, passage_filter)
    # Every spec first (a bad node fails before any work), then their checks (a missing model
    # fails before any arm encodes the corpus), then the stages (a context budget below the
    # shortest passage is refused at start), then the arms.
    ready, specs = arm_specs(arm_names, cfg.arms, given=arms)
    later = active_stages(cfg, ctx, stages)
    with timer.phase("load"):
        run_checks(specs, ctx, "arm")
        run_checks(dict(later), ctx, "stage")
        built_stages = build_stages(later, ctx)
    # A refusal.score_stage naming no stage this job can record fails now, not after retrieval
    # (whether a one-arm query records `fused` is known only then: scoring checks again).
    recorded = [*arm_names, *(arms or {}), "fused", *(name for name, _ in built_stages)]
    check_stage(cfg.refusal.score_stage, recorded)
    type_source(cfg, dataset)  # a type_weights key the evaluation set lacks fails before work
    learned = None
    if cfg.router.name == LEARNED:
        with timer.phase("load"):
            learned = LearnedRouting(cfg, rule_set, arm_names, ctx)
    built = build_arms(arm_names, ready, specs, ctx, _measured(timer, memory))
    pipeline = build_pipeline(
        cfg,
        dataset,
        built,
        built_stages,
        ctx,
        rule_set,
        passage_filter,
        before_cut=before_cut(later),
        learned=learned,
        combiners=combiners,
    )
    outcome = None
    with timer.phase("retrieve"):
        if learned is None:
            records = pipeline.run(list(dataset.queries))
        else:
            records, outcome = _route_learned(cfg, dataset, judgements, pipeline, learned)
    _note_empty_rankings(records)
    # What the arms and stages did in the batch run, before the latency probe calls them again.
    indexes = {name: checked_info(f"arm '{name}'", arm) for name, arm in built.items()}
    stage_infos = {
        name: checked_info(f"stage '{name}'", stage) for name, stage in built_stages
    }
    strategy = configured_strategy(cfg)
    strategies = {strategy.name: strategy}
    if rule_set:
        strategies.update({s.strategy.name: s.strategy for s in rule_set.routes.values()})
    if learned is not None:
        strategies.update(learned.strategy_names())
    probe = None
    if cfg.cost.latency_queries:
        with timer.phase("latency_probe"):
            probe = probe_latency(
                pipeline,
                records,
                strategies,
                cfg.cost.latency_queries,
                indexes,
                router=learned.time_query if learned is not None else None,
            )
    with timer.phase("score"):
        metrics = score_job(cfg, dataset, judgements, groups, records, rule_set)
        if learned is not None and outcome is not None:
            metrics["learned_router"] = learned_metrics(
                records,
                outcome,
                metrics,
                cfg.router.ceiling_folds,
                cfg.router.ceiling_seed,
                significance_settings(cfg.compare),
                cfg.compare.min_queries,
            )
    cost = job_cost(
        machine(), pipeline.timing.to_json(), indexes, probe, memory.phases, memory.job_peak()
    )
    return JobResult(
        dataset,
        judgements,
        records,
        metrics,
        timer.timings,
        ctx.stats.get("embeddings", {}),
        ctx.stats.get("tokenizer", {}),
        indexes=indexes,
        stages=stage_infos,
        own_acl_arms=[name for name, arm in built.items() if applies_own_acl(arm)],
        cost=cost,
        router_model=outcome.model.to_json()
        if outcome is not None and outcome.model is not None and outcome.applied is None
        else None,
    )


def _route_learned(
    cfg: RunConfig,
    dataset: Dataset,
    judgements: Judgements,
    pipeline: Pipeline,
    learned: LearnedRouting,
) -> tuple[list[QueryRecord], LearnedOutcome]:
    """router=learned: search every query, record every candidate, choose each query's
    strategy (job.learned), finish."""
    searched = pipeline.search(list(dataset.queries))
    compared = pipeline.compare(searched)
    positions = {p.id: i for i, p in enumerate(dataset.passages)}
    labels = CodedLabels.build(judgements, positions)
    doc_of = passage_docs(dataset.passages) if cfg.scoring.unit == DOC else None
    selected, outcome = learned.select(
        searched, compared, judgements, labels, doc_of, dataset.name
    )
    return pipeline.finish(searched, compared, selected), outcome


def _measured(timer: _Timer, memory: MemoryMeter) -> Callable[[str], AbstractContextManager[None]]:
    """A phase timed (`timings_s`) and metered (time, peak and growth of resident memory)."""

    @contextmanager
    def phase(name: str) -> Iterator[None]:
        with timer.phase(name), memory.phase(name):
            yield

    return phase


def configured_variants(cfg: RunConfig, dataset: Dataset) -> Dataset:
    """`dataset` with the perturbed variants `cfg.robustness` asks for: the queries a job runs,
    and what its manifest's queries hash covers."""
    source = cfg.dataset.path if cfg.dataset.format == "beir" else cfg.dataset.evalset
    return with_variants(dataset, cfg.robustness, source)


def load_labelled(
    cfg: RunConfig, dataset: Dataset | None = None
) -> tuple[Dataset, Judgements, dict[str, dict[str, str]]]:
    """The dataset (`cfg.dataset`'s, or `dataset` as given), its judgements and the group_by
    lookups: everything scoring reads besides the rankings (also what `rescore` loads to score
    stored rankings against current labels)."""
    if dataset is None:
        dataset = load_configured(cfg)
    else:
        check_corpus_size(cfg, len(dataset.passages), dataset.name)
    # Perturbed variants (robustness:) run with the queries; every standard metric scores the
    # originals only, the variants are scored against them (score_job).
    dataset = configured_variants(cfg, dataset)
    judgements = judge_in_unit(
        cfg.scoring.unit, dataset.originals, dataset.passages, dataset.unjudged
    )
    # Before any retrieval, so a bad group_by field fails fast.
    groups = build_group_by(cfg.scoring.group_by, dataset.queries, dataset.passages)
    return dataset, judgements, groups


def score_job(
    cfg: RunConfig,
    dataset: Dataset,
    judgements: Judgements,
    groups: dict[str, dict[str, str]],
    records: list[QueryRecord],
    rule_set: RuleSet | None,
) -> dict[str, Any]:
    """A job's metrics.json from its records: every stage, family and baseline, the refusal
    evaluation and, with a router, its metrics; with perturbed variants, their `robustness`
    against the originals. One function for a fresh job and for stored rankings re-scored
    (`retrieval_bench.labels.rescore`), so both give the same numbers."""
    variants = [r for r in records if r.query.perturbed_from is not None]
    records = [r for r in records if r.query.perturbed_from is None]
    metrics = score_records(
        records,
        judgements,
        [cfg.top_k, *cfg.scoring.cutoffs],
        ScoringContext.from_dataset(replace(dataset, queries=dataset.originals)),
        groups,
        cfg.refusal,
        passage_ids=[p.id for p in dataset.passages],
        doc_of=passage_docs(dataset.passages) if cfg.scoring.unit == DOC else None,
    )
    if rule_set and cfg.router.name != LEARNED:  # a learned router's: run_job adds them
        metrics["router"] = router_metrics(records, rule_set, dataset.passages, metrics, cfg.top_k)
    if variants or cfg.robustness.active:
        metrics["robustness"] = _score_variants(cfg, dataset, metrics, variants)
    return metrics


def _score_variants(
    cfg: RunConfig, dataset: Dataset, metrics: dict[str, Any], variants: list[QueryRecord]
) -> dict[str, Any]:
    """metrics.json's `robustness` (`scoring.robustness.job_robustness`): the variants scored at
    the stage comparisons read, against their originals' rows there."""
    stage = cfg.compare.stage if cfg.compare.stage in metrics["stages"] else "final"
    originals = metrics["stages"][stage]["per_query"]
    doc = cfg.scoring.unit == DOC
    scored = variant_rows(
        variants,
        judge_in_unit(cfg.scoring.unit, [r.query for r in variants], dataset.passages),
        originals,
        [cfg.top_k, *cfg.scoring.cutoffs],
        stage,
        passage_ids=[p.id for p in dataset.passages],
        doc_of=passage_docs(dataset.passages) if doc else None,
        original_texts={q.query_id: q.query for q in dataset.originals},
    )
    resolved = [m.replace("@K", f"@{cfg.top_k}") for m in cfg.robustness.metrics]
    return job_robustness(
        scored,
        originals,
        dataset.perturbations,
        resolved,
        cfg.top_k,
        stage,
        significance_settings(cfg.compare),
        cfg.compare.min_queries,
        cfg.compare.family,
    )


def _note_empty_rankings(records: list[QueryRecord]) -> None:
    """One console line when some stage returned nothing for some queries (they score 0)."""
    parts = []
    for name in stage_names(records):
        counts = empty_rankings([r.stages.get(name) for r in records])
        if counts:
            reasons = ", ".join(f"{reason} {n}" for reason, n in counts.items())
            parts.append(f"{name} {sum(counts.values())} ({reasons})")
    if parts:
        log.warning("empty rankings (scored 0): %s", "; ".join(parts))


@dataclass(frozen=True)
class ShardResult:
    """What a shard job (`encoder.shard_only=i`) did."""

    dataset: str
    shard: int
    shards: int
    passages: int
    stats: CacheStats


def run_shard_job(cfg: RunConfig) -> ShardResult:
    """Encode one shard of the corpus into the embedding cache, and nothing else.

    One job of a multirun or SLURM array over `encoder.shard_only=0,1,...`; the job that then
    retrieves (same config without shard_only) assembles the shards from the cache.
    """
    assert cfg.encoder.shard_only is not None
    writable_dir(resolve_output(cfg.cache_dir), "cache_dir", CACHE_SUBDIRS)
    dataset = load_configured(cfg)
    texts = [passage_text(p) for p in dataset.passages]
    cache = EmbeddingCache(resolve_output(cfg.cache_dir) / CACHE_SUBDIRS[1])
    index = cfg.encoder.shard_only
    encoder = build_encoder(cfg.encoder)
    encoder.name_texts("passages", texts, [p.id for p in dataset.passages])
    stats = encode_shard(cache, encoder, texts, cfg.encoder.shards, index)
    start, end = shard_bounds(len(texts), cfg.encoder.shards)[index]
    return ShardResult(dataset.name, index, cfg.encoder.shards, end - start, stats)
