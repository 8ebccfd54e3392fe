"""A trial's job, replayed without re-encoding or re-tokenising anything, and scored per query.

Every trial is a job: parse -> route -> filter -> arms -> combine -> later stages, assembled by
the job's own functions (job.assemble, job.build) for the trial's config. What a trial cannot
change is computed once and reused by every trial that shares it:

* the dataset, its labels and their integer codes (scoring);
* each arm, built once per *arm setting*: its `arms.<name>` node and every config key an arm
  may read (`arm_keys`: the whole config less the keys that only steer fusion, routing thresholds,
  later stages and scoring). Building reads the token and embedding caches anyway; here it
  happens once, not once per trial;
* each arm's pool for a query, per (query, pool size, filter mask) (`MemoArm`): a trial that
  only changes fusion weights or settings, reranker depth or router thresholds asks no
  arm anything new;
* each query's parse (per negation settings) and filter decision (per filter settings).

The combiners, stages and the pipeline are built for every trial from its config, and the
records are scored by the scoring package's per-query core (`per_query_columns_coded`, the
integer path a job scores with), so a replayed trial's per-query values are those of a fresh job
of the same config (tests/unit/tune/test_tune.py checks it)."""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

import numpy as np

from retrieval_bench.config import RunConfig
from retrieval_bench.config.filters import FilterConfig
from retrieval_bench.config.schema import DOC
from retrieval_bench.errors import ConfigError
from retrieval_bench.io.folders import writable_dir
from retrieval_bench.job.assemble import (
    build_context,
    build_parser,
    build_pipeline,
    configured_strategy,
    job_arm_names,
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
from retrieval_bench.job.filters import PassageFilter
from retrieval_bench.job.pipeline import Searched
from retrieval_bench.job.runner import CACHE_SUBDIRS, load_labelled
from retrieval_bench.paths import resolve_output
from retrieval_bench.plugins import checked_info, guarded_call
from retrieval_bench.protocols import Arm, BuildContext, Stage
from retrieval_bench.records import (
    Dataset,
    EvalQuery,
    FilterDecision,
    ParsedQuery,
    QueryRecord,
    Ranked,
)
from retrieval_bench.routing.router import build_router
from retrieval_bench.routing.rules import RuleSet, load_rule_set
from retrieval_bench.scoring.aggregate import CodedLabels
from retrieval_bench.scoring.records import per_query_values
from retrieval_bench.scoring.units import passage_docs

# Config keys no arm reads when it is built or asked: its pool size and filter masks reach it
# through the pipeline, and these steer only fusion, routing decisions, later stages, scoring
# and the tools around a job. Every other key is part of an arm's setting.
NOT_ARM_SETTINGS: dict[str, tuple[str, ...] | None] = {
    "retriever": (
        "name", "combine", "weights", "type_weights",
        "type_weights_from", "pool_size", "arms",
    ),
    "router": (
        "short_query_length", "negation", "rules", "routes", "default_route", "strategies",
        "tuned_on_evalset", "ceiling_folds", "ceiling_seed",
    ),
    "top_k": None, "stages": None,
    "combiners": None, "refusal": None, "scoring": None, "compare": None, "benchmark": None,
    "tune": None, "arms": None,
}  # fmt: skip


def arm_keys(cfg: RunConfig, names: Sequence[str]) -> dict[str, str]:
    """What each arm of `names` is built from: its node and the config keys an arm may read."""
    settings = asdict(cfg)
    for section, keys in NOT_ARM_SETTINGS.items():
        if keys is None:
            settings.pop(section, None)
        else:
            for key in keys:
                settings[section].pop(key, None)
    shared = _canonical(settings)
    return {name: _canonical([name, cfg.arms.get(name)]) + shared for name in names}


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)


class MemoArm:
    """An arm whose pools are kept per (query, k, filter mask): asked again, it answers from
    memory; asked something new, the arm it wraps ranks only that, in one batch."""

    def __init__(self, arm: Arm, name: str) -> None:
        self.arm = arm
        self.what = f"arm '{name}'"
        self.pools: dict[tuple[str, str, int, bytes | None], Ranked] = {}
        self.searched = 0
        self.reused = 0
        if applies_own_acl(arm):
            self.applies_own_acl = True

    def search(
        self, queries: Sequence[EvalQuery], k: int, allowed: Sequence[np.ndarray | None]
    ) -> list[Ranked]:
        keys = [
            (q.query_id, q.query, k, None if m is None else np.packbits(m).tobytes())
            for q, m in zip(queries, allowed, strict=True)
        ]
        missing = list(dict.fromkeys(i for i, key in enumerate(keys) if key not in self.pools))
        first = {keys[i]: i for i in reversed(missing)}
        todo = sorted(first.values())
        if todo:
            # The arm's own call crosses the plug-in boundary here (an outside arm's exception
            # is its own): the pipeline sees this memo, one of the package's classes.
            found = guarded_call(
                self.what,
                self.arm,
                self.arm.search,
                [queries[i] for i in todo],
                k,
                [allowed[i] for i in todo],
            )
            for i, ranked in zip(todo, found, strict=True):
                self.pools[keys[i]] = ranked
            self.searched += len(todo)
        self.reused += len(keys) - len(todo)
        return [self.pools[key] for key in keys]

    def info(self) -> dict[str, Any]:
        return checked_info(self.what, self.arm)


class MemoFilter(PassageFilter):
    """The job's passage filter, each decision kept per (cities, role, exclusions); its masks
    are read-only, as every trial shares them."""

    def __init__(self, passages: Sequence[Any], config: FilterConfig) -> None:
        super().__init__(passages, config)
        self.decisions: dict[tuple[Any, ...], FilterDecision] = {}

    def decide(
        self, cities: Sequence[str], user_role: str | None, excluded_entities: Sequence[str]
    ) -> FilterDecision:
        key = (tuple(cities), user_role, tuple(excluded_entities))
        if key not in self.decisions:
            decision = super().decide(cities, user_role, excluded_entities)
            if decision.mask is not None:
                decision.mask.flags.writeable = False
            self.decisions[key] = decision
        return self.decisions[key]


def memoised(parse: Callable[[str], ParsedQuery]) -> Callable[[str], ParsedQuery]:
    memo: dict[str, ParsedQuery] = {}

    def cached(text: str) -> ParsedQuery:
        if text not in memo:
            memo[text] = parse(text)
        return memo[text]

    return cached


class Replay:
    """Trials of one tuning, on one dataset: `records(cfg, qids)` runs the trial's job on those
    queries, `scores(cfg, qids, metric, stage)` gives each query's metric value."""

    def __init__(self, cfg: RunConfig, dataset: Dataset | None = None) -> None:
        writable_dir(resolve_output(cfg.cache_dir), "cache_dir", CACHE_SUBDIRS)
        self.dataset, self.judgements, _ = load_labelled(cfg, dataset)
        self.queries = {q.query_id: q for q in self.dataset.queries}
        self.unit = cfg.scoring.unit
        ids = [p.id for p in self.dataset.passages]
        self.labels = CodedLabels.build(self.judgements, {pid: i for i, pid in enumerate(ids)})
        self.doc_of = passage_docs(self.dataset.passages) if self.unit == DOC else None
        self.arms: dict[str, MemoArm] = {}
        self.filters: dict[str, MemoFilter] = {}
        self.parsers: dict[str, Callable[[str], ParsedQuery]] = {}
        self.rule_sets: dict[str, RuleSet | None] = {}
        self.stage_sets: dict[str, tuple[list[tuple[str, Stage]], frozenset[str]]] = {}
        self.contexts: dict[str, BuildContext] = {}
        self.memo: dict[tuple[str, ...], dict[str, float]] = {}
        self.searched: dict[str, dict[str, Searched]] = {}
        self.reused = 0

    @property
    def scored_ids(self) -> list[str]:
        """Every query the labels score, in the evaluation set's order."""
        return list(self.judgements.qrels)

    def type_of(self, qid: str) -> str:
        return self.judgements.query_types[qid]

    def rule_set(self, cfg: RunConfig) -> RuleSet | None:
        key = self._router_key(cfg)
        if key not in self.rule_sets:
            self.rule_sets[key] = load_rule_set(cfg.router, tuple(cfg.arms), tuple(cfg.combiners))
        return self.rule_sets[key]

    def _router_key(self, cfg: RunConfig) -> str:
        return _canonical([asdict(cfg.router), sorted(cfg.arms), sorted(cfg.combiners)])

    def routes(self, cfg: RunConfig, qids: Sequence[str]) -> dict[str, str | None]:
        """Each query's route under the trial's router (None without one)."""
        rule_set = self.rule_set(cfg)
        parse = self._parse(rule_set)
        route, _ = build_router(rule_set, configured_strategy(cfg), [])
        return {q: route(self.queries[q], parse(self.queries[q].query)).route for q in qids}

    def records(self, cfg: RunConfig, qids: Sequence[str]) -> list[QueryRecord]:
        """The trial's job on the queries `qids`, as `run_job` would record them. A query
        searched before under the same parse, routing, filters, arms and pool size is only
        finished (combined, through the later stages) under this trial's settings."""
        rule_set = self.rule_set(cfg)
        passage_filter = self._filter(cfg.filters)
        ctx = self._context(cfg, rule_set, passage_filter)
        keys = arm_keys(cfg, job_arm_names(cfg, rule_set))
        arms = {name: self._arm(name, key, cfg, ctx) for name, key in keys.items()}
        stages, stages_before_cut = self._stages(cfg, ctx)
        pipeline = build_pipeline(
            cfg,
            self.dataset,
            arms,
            stages,
            ctx,
            rule_set,
            passage_filter,
            parse=self._parse(rule_set),
            before_cut=stages_before_cut,
        )
        key = "".join(
            [self._router_key(cfg), _canonical(asdict(cfg.filters)), *keys.values(),
             _canonical([cfg.retriever.pool_size, cfg.retriever.arms, cfg.retriever.combine])]
        )  # fmt: skip
        searched = self.searched.setdefault(key, {})
        todo = [q for q in qids if q not in searched]
        if todo:
            found = pipeline.search([self.queries[q] for q in todo])
            searched.update(zip(todo, found, strict=True))
        self.reused += len(qids) - len(todo)
        return pipeline.finish([searched[q] for q in qids])

    def scores(
        self,
        cfg: RunConfig,
        qids: Sequence[str],
        metric: tuple[str, int],
        stage: str,
        memo_key: tuple[str, ...] | None = None,
    ) -> np.ndarray:
        """Each query's value of `metric` (name, cut-off) at `stage`, in `qids` order; with a
        `memo_key` (the trial's overrides) values already computed for it are reused."""
        known = self.memo.setdefault(memo_key, {}) if memo_key is not None else {}
        todo = [q for q in qids if q not in known]
        if todo:
            known.update(self._score(self.records(cfg, todo), metric, stage))
        return np.array([known[q] for q in qids], dtype=np.float64)

    def _score(
        self, records: Sequence[QueryRecord], metric: tuple[str, int], stage: str
    ) -> dict[str, float]:
        qids = [r.query.query_id for r in records]
        missing = [q for q, r in zip(qids, records, strict=True) if stage not in r.stages]
        if missing:
            raise ConfigError(
                "tune.stage",
                f"'{stage}' is not recorded for query {missing[0]} (recorded: "
                f"{', '.join(records[qids.index(missing[0])].stages)})",
            )
        values = per_query_values(
            [r.stages[stage] for r in records], qids, self.judgements, self.labels, metric,
            self.doc_of,
        )  # fmt: skip
        return dict(zip(qids, values.tolist(), strict=True))

    def _filter(self, config: FilterConfig) -> MemoFilter:
        key = _canonical(asdict(config))
        if key not in self.filters:
            self.filters[key] = MemoFilter(self.dataset.passages, config)
        return self.filters[key]

    def _parse(self, rule_set: RuleSet | None) -> Callable[[str], ParsedQuery]:
        key = _canonical(asdict(rule_set.negation) if rule_set else None)
        if key not in self.parsers:
            self.parsers[key] = memoised(build_parser(self.dataset, rule_set).parse)
        return self.parsers[key]

    def _context(
        self, cfg: RunConfig, rule_set: RuleSet | None, passage_filter: PassageFilter
    ) -> BuildContext:
        """The trial's BuildContext; what it computes from the corpus (ids, texts) is shared."""
        key = _canonical([cfg.cache_dir, rule_set is not None, asdict(cfg.filters)])
        if key not in self.contexts:
            self.contexts[key] = build_context(cfg, self.dataset, rule_set, passage_filter)
        ctx = copy.copy(self.contexts[key])
        ctx.cfg = cfg
        return ctx

    def _arm(self, name: str, key: str, cfg: RunConfig, ctx: BuildContext) -> MemoArm:
        """Arm `name` of setting `key` (`arm_keys`), built on first use."""
        if key not in self.arms:
            _, specs = arm_specs([name], cfg.arms)
            run_checks(specs, ctx, "arm")
            built = build_arms([name], {}, specs, ctx, lambda _: contextlib.nullcontext())
            self.arms[key] = MemoArm(built[name], name)
        return self.arms[key]

    def _stages(
        self, cfg: RunConfig, ctx: BuildContext
    ) -> tuple[list[tuple[str, Stage]], frozenset[str]]:
        """The trial's built stages and the names of those before the cut."""
        key = _canonical([cfg.stages, cfg.top_k, cfg.retriever.pool_size])
        if key not in self.stage_sets:
            later = active_stages(cfg, ctx)
            run_checks(dict(later), ctx, "stage")
            self.stage_sets[key] = (build_stages(later, ctx), before_cut(later))
        return self.stage_sets[key]

    def work(self) -> dict[str, int]:
        """What the trials cost the arms: arm settings built, pools an arm ranked, and the
        queries replayed from kept pools (a trial that changed only fusion or a later stage)
        or from pools an arm kept (a trial that changed routing)."""
        return {
            "arm_settings_built": len(self.arms),
            "pools_searched": sum(a.searched for a in self.arms.values()),
            "queries_replayed": self.reused,
            "pools_reused": sum(a.reused for a in self.arms.values()),
        }
