"""One job, as data flows: load -> build arms -> run the pipeline -> score -> write outputs."""

from __future__ import annotations

import logging
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from retrieval_bench.arms import build_arms
from retrieval_bench.components import Arm, ArmSpec, BuildContext, passage_text
from retrieval_bench.config import RunConfig, check_corpus_size
from retrieval_bench.data.loader import load_dataset
from retrieval_bench.data.records import Dataset
from retrieval_bench.embedding_cache import CacheStats, EmbeddingCache
from retrieval_bench.embedding_shards import encode_shard, shard_bounds
from retrieval_bench.encoders import build_encoder
from retrieval_bench.filters import PassageFilter
from retrieval_bench.io import writable_dir
from retrieval_bench.job_result import JobResult
from retrieval_bench.pipeline import (
    Pipeline,
    QueryRecord,
    StageRecord,
    Strategy,
    empty_rankings,
)
from retrieval_bench.query_parser import NegationRules, QueryParser
from retrieval_bench.retrievers.base import shared_tie_break
from retrieval_bench.retrievers.fusion import build_combiner
from retrieval_bench.router import build_router
from retrieval_bench.router_config import PROJECT_ROOT, RuleSet, load_rule_set, resolve_path
from retrieval_bench.scoring.aggregate import CodedLabels, score_stage, score_stage_coded
from retrieval_bench.scoring.families import ScoringContext, merge_headlines, score_families
from retrieval_bench.scoring.groups import build_group_by
from retrieval_bench.scoring.labels import Judgements
from retrieval_bench.scoring.refusal import (
    RefusalConfig,
    check_stage,
    choose_stage,
    score_refusal,
)
from retrieval_bench.scoring.routing import router_metrics
from retrieval_bench.scoring.stage_loss import stage_loss
from retrieval_bench.scoring.units import DOC, PASSAGE, doc_ranking, judge_in_unit, passage_docs
from retrieval_bench.stages import build_later_stages

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


def _load(cfg: RunConfig) -> Dataset:
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
) -> JobResult:
    """One job: `cfg`'s dataset (or `dataset`, records built by the caller) through the
    pipeline, every stage recorded and scored. `arms` adds arms by name beside `cfg.arms`
    (ready Arm objects, or specs built against the corpus); `retriever.arms` picks among both."""
    writable_dir(resolve_path(cfg.cache_dir), "cache_dir", CACHE_SUBDIRS)  # before any work
    timer = _Timer()
    with timer.phase("load"):
        dataset, judgements, groups = load_labelled(cfg, dataset)
    rule_set = load_rule_set(cfg.router, tuple(cfg.arms))
    strategy = Strategy(
        name=cfg.retriever.name, arms=tuple(cfg.retriever.arms), combine=cfg.retriever.combine
    )
    # With a router every arm a strategy names is built, and each runs alone as a baseline for
    # the routed-vs-single comparison.
    arm_names = list(cfg.retriever.arms)
    if rule_set:
        for served in rule_set.routes.values():
            arm_names.extend(a for a in served.strategy.arms if a not in arm_names)
    passage_filter = PassageFilter(dataset.passages, cfg.filters)
    ctx = BuildContext(
        passages=dataset.passages,
        queries=dataset.queries,
        cfg=cfg,
        tie_break=shared_tie_break([p.id for p in dataset.passages]),
        cache_dir=resolve_path(cfg.cache_dir),
        entities=dataset.entities,
        possible_filters=passage_filter.possible(dataset.queries, exclusions=rule_set is not None),
    )
    # Before the arms (which may encode the corpus): a missing reranker model or a context
    # budget below the shortest passage is refused at start.
    rerank, context = build_later_stages(cfg, ctx)
    # A refusal.score_stage naming no stage this job can record fails now, not after retrieval
    # (whether a one-arm query records `fused` is known only then: scoring checks again).
    later = [stage.name for stage in (rerank, context) if stage is not None]
    check_stage(cfg.refusal.score_stage, [*arm_names, *(arms or {}), "fused", "final", *later])
    built = build_arms(arm_names, cfg.arms, ctx, timer.phase, given=arms)
    cities = {str(p.meta.get("city")) for p in dataset.passages if p.meta.get("city")}
    parser = QueryParser(
        cities, dataset.entities, rule_set.negation if rule_set else NegationRules()
    )
    route, baselines = build_router(rule_set, strategy, arm_names)
    combine_names = {strategy.combine, *(s.combine for s in baselines.values())}
    if rule_set:
        combine_names.update(served.strategy.combine for served in rule_set.routes.values())
    pipeline = Pipeline(
        dataset.passages,
        built,
        parse=parser.parse,
        passage_filter=passage_filter,
        route=route,
        pool_size=cfg.retriever.pool_size,
        top_k=cfg.top_k,
        combiners={name: build_combiner(cfg.retriever, name) for name in combine_names},
        baselines=baselines,
        rerank=rerank,
        context=context,
    )
    with timer.phase("retrieve"):
        records = pipeline.run(list(dataset.queries))
    _note_empty_rankings(records)
    with timer.phase("score"):
        metrics = score_job(cfg, dataset, judgements, groups, records, rule_set)
    return JobResult(
        dataset,
        judgements,
        records,
        metrics,
        timer.timings,
        ctx.stats.get("embeddings", {}),
        ctx.stats.get("tokenizer", {}),
        indexes={name: arm.info() for name, arm in built.items()},
        stages={stage.name: stage.info() for stage in (rerank, context) if stage is not None},
    )


def load_labelled(
    cfg: RunConfig, dataset: Dataset | None = None
) -> tuple[Dataset, Judgements, dict[str, dict[str, str]]]:
    """The dataset (`cfg.dataset`'s, or `dataset` as given), its judgements and the group_by
    lookups: everything scoring reads besides the rankings (also what `rescore` loads to score
    stored rankings against current labels)."""
    if dataset is None:
        dataset = _load(cfg)
    else:
        check_corpus_size(cfg, len(dataset.passages), dataset.name)
    judgements = judge_in_unit(
        cfg.scoring.unit, dataset.queries, dataset.passages, dataset.unjudged
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
    evaluation and, with a router, its metrics. One function for a fresh job and for stored
    rankings re-scored (`retrieval_bench.rescore`), so both give the same numbers."""
    metrics = score_records(
        records,
        judgements,
        [cfg.top_k, *cfg.scoring.cutoffs],
        ScoringContext.from_dataset(dataset),
        groups,
        cfg.refusal,
        passage_ids=[p.id for p in dataset.passages],
        doc_of=passage_docs(dataset.passages) if cfg.scoring.unit == DOC else None,
    )
    if rule_set:
        metrics["router"] = router_metrics(records, rule_set, dataset.passages, metrics, cfg.top_k)
    return metrics


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
    writable_dir(resolve_path(cfg.cache_dir), "cache_dir", CACHE_SUBDIRS)
    dataset = _load(cfg)
    texts = [passage_text(p) for p in dataset.passages]
    cache = EmbeddingCache(resolve_path(cfg.cache_dir) / CACHE_SUBDIRS[1])
    index = cfg.encoder.shard_only
    stats = encode_shard(cache, build_encoder(cfg.encoder), texts, cfg.encoder.shards, index)
    start, end = shard_bounds(len(texts), cfg.encoder.shards)[index]
    return ShardResult(dataset.name, index, cfg.encoder.shards, end - start, stats)


def stage_names(records: list[QueryRecord]) -> list[str]:
    """Every recorded stage in pipeline order: those before the top_k cut (arms, fused,
    rerank) as first seen, then `final`, then those after it (context). A router's queries
    record different arms, so the order is taken across all records."""
    before: dict[str, None] = {}
    after: dict[str, None] = {}
    for record in records:
        seen_final = False
        for name in record.stages:
            if name == "final":
                seen_final = True
            elif seen_final:
                after.setdefault(name, None)
            else:
                before.setdefault(name, None)
    return [*before, "final", *after]


def score_records(
    records: list[QueryRecord],
    judgements: Judgements,
    cutoffs: list[int],
    context: ScoringContext | None = None,
    group_by: dict[str, dict[str, str]] | None = None,
    refusal: RefusalConfig | None = None,
    passage_ids: Sequence[str] | None = None,
    doc_of: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Every stage's doc metrics; with a context also its other metric families
    (`stage["families"]`, see scoring.families) and, with a refusal config, the job's refusal
    evaluation (`metrics["refusal"]`).

    With `passage_ids` (the corpus order the pipeline's indices refer to), the doc metrics
    score each stage's passage indices (`StageRecord.indices`) through the integer core, with
    the labels coded once per job: the same numbers as scoring the ids, without touching an
    id string per ranked passage. Rankings are still checked for duplicates there (a cheap
    row-wise sort), although the pipeline makes them unique by construction.

    With `doc_of` (passage id -> document id) every ranking is scored as its documents'
    ranking against `judgements` read by document (`scoring.units`, `scoring.unit=doc`); the
    passage families (readable, leak, entities, evidence) read passage metadata and are not
    scored then. `metrics["unit"]` says which unit was scored."""
    cutoffs = sorted(set(cutoffs))
    if doc_of is not None:
        records = [doc_record(r, doc_of) for r in records]
        passage_ids = None
    doc_metrics = _doc_scorer(records, judgements, cutoffs, passage_ids)
    stages = {}
    for name in stage_names(records):
        stage_records = [r.stages.get(name) for r in records]
        stages[name] = doc_metrics(stage_records, group_by)
        stages[name]["counts"]["empty_rankings"] = empty_rankings(stage_records)
        if context is not None and doc_of is None:
            rankings = {r.query.query_id: r.stages[name].ids for r in records if name in r.stages}
            stages[name]["families"] = score_families(
                rankings, judgements, context, cutoffs, group_by
            )
            merge_headlines(stages[name])
        _flag_depth(stages[name], stage_records, cutoffs)
    unit = PASSAGE if doc_of is None else DOC
    result: dict[str, Any] = {"unit": unit, "cutoffs": cutoffs, "stages": stages}
    if context is not None and refusal is not None:
        stage = choose_stage(refusal.score_stage, [set(r.stages) for r in records])
        scores = {r.query.query_id: r.stages[stage].scores for r in records if stage in r.stages}
        result["refusal"] = score_refusal(
            scores, judgements, context.unreadable(judgements), stage, refusal.thresholds
        )
    result["stage_loss"] = stage_loss(
        {r.query.query_id: {n: s.ids for n, s in r.stages.items()} for r in records}, judgements
    )
    # Single retrievers run beside a router (see QueryRecord.baselines), scored the same way.
    baseline_names = dict.fromkeys(name for r in records for name in r.baselines)
    if baseline_names:
        result["baselines"] = {}
        for name in baseline_names:
            stage_records = [r.baselines.get(name) for r in records]
            result["baselines"][name] = doc_metrics(stage_records, None)
            result["baselines"][name]["counts"]["empty_rankings"] = empty_rankings(stage_records)
            _flag_depth(result["baselines"][name], stage_records, cutoffs)
    return result


def doc_stage(stage: StageRecord, doc_of: Mapping[str, str]) -> StageRecord:
    """One recorded stage as its documents' ranking (`scoring.units.doc_ranking`)."""
    ids, scores = doc_ranking(stage.ids, stage.scores, doc_of)
    return replace(stage, ids=ids, scores=scores, pool_returned=len(ids), indices=None)


def doc_record(record: QueryRecord, doc_of: Mapping[str, str]) -> QueryRecord:
    """Every stage and baseline of a query's record as document rankings."""
    return replace(
        record,
        stages={name: doc_stage(s, doc_of) for name, s in record.stages.items()},
        baselines={name: doc_stage(s, doc_of) for name, s in record.baselines.items()},
    )


def _flag_depth(
    stage: dict[str, Any], lists: Sequence[StageRecord | None], cutoffs: Sequence[int]
) -> None:
    """Mark the cut-offs deeper than the longest list the stage was asked for (`top_k` for
    `final`): a metric there is not measured at that depth (recall@10 of a 6-long list is
    recall@6, precision@10 counts 4 empty places), so reports flag it instead of showing it
    as if it were (`stage["depth_exceeds_list"]`)."""
    length = max((s.pool_requested for s in lists if s is not None), default=0)
    deeper = [k for k in cutoffs if k > length]
    if deeper:
        stage["depth_exceeds_list"] = {"list_length": length, "cutoffs": deeper}


def _doc_scorer(
    records: list[QueryRecord],
    judgements: Judgements,
    cutoffs: list[int],
    passage_ids: Sequence[str] | None,
) -> Callable[[list[StageRecord | None], dict[str, dict[str, str]] | None], dict[str, Any]]:
    """score_stage for one stage (given as each record's StageRecord or None), by passage
    indices when every record carries them and the corpus order is known, else by ids."""
    qids = [r.query.query_id for r in records]
    indexed = passage_ids is not None and all(
        stage.indices is not None
        for r in records
        for stage in (*r.stages.values(), *r.baselines.values())
    )
    if not indexed:

        def by_ids(
            stages: list[StageRecord | None], group_by: dict[str, dict[str, str]] | None
        ) -> dict[str, Any]:
            rankings = {q: s.ids for q, s in zip(qids, stages, strict=True) if s is not None}
            return score_stage(rankings, judgements, cutoffs, group_by)

        return by_ids
    labels = CodedLabels.build(judgements, {pid: i for i, pid in enumerate(passage_ids or ())})

    def by_indices(
        stages: list[StageRecord | None], group_by: dict[str, dict[str, str]] | None
    ) -> dict[str, Any]:
        rankings = {
            q: s.indices
            for q, s in zip(qids, stages, strict=True)
            if s is not None and s.indices is not None
        }
        return score_stage_coded(rankings, judgements, labels, cutoffs, group_by)

    return by_indices


def git_revision() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            timeout=10,
        )
        return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None
