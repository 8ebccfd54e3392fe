"""Each query through parse -> filter -> arms -> combine -> rerank -> cut -> context, with
every stage recorded under its own name (each arm's, `fused`, `rerank`, `final`, `context`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

import numpy as np

from retrieval_bench.job.filters import PassageFilter
from retrieval_bench.protocols import Arm, Combiner, LaterStage
from retrieval_bench.records import (
    FILTERED_OUT,
    NO_CANDIDATES,
    EvalQuery,
    ParsedQuery,
    Passage,
    QueryRecord,
    Ranked,
    StageRecord,
    empty_rankings,
)
from retrieval_bench.routing.router import Router
from retrieval_bench.routing.rules import Strategy
from retrieval_bench.tiebreak import shared_tie_break

__all__ = ["Pipeline", "QueryRecord", "Router", "StageRecord", "Strategy", "empty_rankings"]


class Pipeline:
    def __init__(
        self,
        passages: Sequence[Passage],
        arms: Mapping[str, Arm],
        parse: Callable[[str], ParsedQuery],
        passage_filter: PassageFilter,
        route: Router,
        pool_size: int,
        top_k: int,
        combiners: Mapping[str, Combiner],
        baselines: Mapping[str, Strategy] | None = None,
        rerank: LaterStage | None = None,
        context: LaterStage | None = None,
    ) -> None:
        """`combiners`: each combine name a strategy may use -> its combiner. `rerank` re-orders
        each query's combined ranking before the top_k cut; `context` selects from `final`."""
        self.ids = [p.id for p in passages]
        self.arms = arms
        self.parse = parse
        self.passage_filter = passage_filter
        self.route = route
        self.pool_size = pool_size
        self.top_k = top_k
        self.combiners = combiners
        self.baselines = dict(baselines or {})
        self.rerank = rerank
        self.context = context
        self.tie_break = shared_tie_break(self.ids)

    def run(self, queries: Sequence[EvalQuery]) -> list[QueryRecord]:
        parsed = [self.parse(q.query) for q in queries]
        routed = [self.route(q, p) for q, p in zip(queries, parsed, strict=True)]
        decisions = [
            self.passage_filter.decide(
                p.cities, q.user_role, p.excluded_entities if r.strategy.exclude else ()
            )
            for q, p, r in zip(queries, parsed, routed, strict=True)
        ]
        wanted = [set(r.strategy.arms) for r in routed]
        masks = [d.mask for d in decisions]
        baseline_arms = {arm for s in self.baselines.values() for arm in s.arms}
        # Baselines share the routed pools when the routed filter excluded nothing; otherwise
        # they rank again under the filter a router-less job would have used. Both kinds of
        # request go to each arm in one batch, so a query is encoded once per job.
        plain: list[int] = []
        if baseline_arms:
            for i, (query, parse, decision) in enumerate(
                zip(queries, parsed, decisions, strict=True)
            ):
                if "exclusions" in decision.applied:
                    plain.append(i)
                    masks.append(self.passage_filter.decide(parse.cities, query.user_role, ()).mask)
                    wanted.append(baseline_arms)
                else:
                    wanted[i] |= baseline_arms
        searched = self._search([*queries, *(queries[i] for i in plain)], masks, wanted)
        pools = searched[: len(queries)]
        plain_pools = dict(zip(plain, searched[len(queries) :], strict=True))
        stages: list[dict[str, StageRecord]] = []
        ranked: list[Ranked] = []
        for routing, arm_pools in zip(routed, pools, strict=True):
            strategy = routing.strategy
            recorded = {name: self._stage(arm_pools[name]) for name in strategy.arms}
            combined = self._combine(strategy, [arm_pools[name] for name in strategy.arms])
            if len(strategy.arms) > 1:
                recorded["fused"] = self._stage(combined)
            stages.append(recorded)
            ranked.append(combined)
        if self.rerank is not None:
            ranked = self.rerank.apply(queries, ranked)
            for recorded, result in zip(stages, ranked, strict=True):
                recorded[self.rerank.name] = self._stage(result)
        final = [self._cut(result) for result in ranked]
        for recorded, result in zip(stages, final, strict=True):
            recorded["final"] = self._stage(result)
        if self.context is not None:
            for recorded, result in zip(stages, self.context.apply(queries, final), strict=True):
                recorded[self.context.name] = self._stage(result)
        records = []
        for i, (query, parse, routing, decision, arm_pools) in enumerate(
            zip(queries, parsed, routed, decisions, pools, strict=True)
        ):
            base_pools = plain_pools.get(i, arm_pools)
            baselines = {
                name: self._stage(self._cut(self._combine(s, [base_pools[a] for a in s.arms])))
                for name, s in self.baselines.items()
            }
            records.append(
                QueryRecord(
                    query,
                    routing.route,
                    routing.strategy.name,
                    parse,
                    decision,
                    stages[i],
                    rule=routing.rule,
                    baselines=baselines,
                )
            )
        return records

    def _search(
        self,
        queries: Sequence[EvalQuery],
        masks: Sequence[np.ndarray | None],
        wanted: Sequence[set[str]],
    ) -> list[dict[str, Ranked]]:
        """Each arm ranks, in one batch, every query that wants it."""
        pools: list[dict[str, Ranked]] = [{} for _ in queries]
        for arm_name, arm in self.arms.items():
            members = [i for i, arms in enumerate(wanted) if arm_name in arms]
            if not members:
                continue
            ranked = arm.search(
                [queries[i] for i in members], self.pool_size, [masks[i] for i in members]
            )
            for i, result in zip(members, ranked, strict=True):
                if not result.returned and result.empty_reason is None:
                    mask = masks[i]
                    reason = FILTERED_OUT if mask is not None and not mask.any() else NO_CANDIDATES
                    result = replace(result, empty_reason=reason)
                pools[i][arm_name] = result
        return pools

    def _cut(self, ranked: Ranked) -> Ranked:
        return Ranked(
            ranked.indices[: self.top_k],
            ranked.scores[: self.top_k],
            self.top_k,
            ranked.empty_reason,
        )

    def _combine(self, strategy: Strategy, pools: list[Ranked]) -> Ranked:
        # A lone pool passes through, and pools all empty say why (fusion.pools).
        return self.combiners[strategy.combine].combine(pools, self.tie_break)

    def _stage(self, ranked: Ranked) -> StageRecord:
        return StageRecord(
            ids=[self.ids[i] for i in ranked.indices.tolist()],
            scores=[float(s) for s in ranked.scores.tolist()],
            pool_requested=ranked.requested,
            pool_returned=ranked.returned,
            indices=ranked.indices,
            empty_reason=ranked.empty_reason if not ranked.returned else None,
        )
