"""Each query through parse -> filter -> arms -> combine -> rerank -> cut -> context, with
every stage recorded under its own name (each arm's, `fused`, `rerank`, `final`, `context`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import numpy as np

from retrieval_bench.components import Arm, Combiner, LaterStage
from retrieval_bench.data.records import EvalQuery, Passage
from retrieval_bench.filters import FilterDecision, PassageFilter
from retrieval_bench.query_parser import ParsedQuery
from retrieval_bench.retrievers.base import (
    FILTERED_OUT,
    NO_CANDIDATES,
    Ranked,
    shared_tie_break,
)


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


@dataclass(frozen=True)
class StageRecord:
    ids: list[str]
    scores: list[float]
    pool_requested: int
    pool_returned: int
    # The same ranking as passage indices (`ids[i] == passage_ids[indices[i]]`), which the
    # job scores through the integer core; None for a record built without a corpus at hand.
    # Unique by construction (TieBreak.top, RRF and "fill" emit each index once); the scorer
    # still checks, as the check is one vectorised sort.
    indices: np.ndarray | None = field(default=None, repr=False, compare=False)
    # Why the ranking is empty (retrievers.base: no_query_terms, ...); None when it is not.
    empty_reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ids": self.ids,
            "scores": self.scores,
            "pool_requested": self.pool_requested,
            "pool_returned": self.pool_returned,
        }
        if self.empty_reason is not None:
            out["empty_reason"] = self.empty_reason
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any], positions: Mapping[str, int]) -> StageRecord:
        """Back from `to_json`, with the passage indices of the corpus order `positions`
        (passage id -> index), so stored rankings score through the job's own path."""
        ids = list(data["ids"])
        return cls(
            ids=ids,
            scores=[float(s) for s in data["scores"]],
            pool_requested=int(data["pool_requested"]),
            pool_returned=int(data["pool_returned"]),
            indices=np.fromiter((positions[pid] for pid in ids), dtype=np.int64, count=len(ids)),
            empty_reason=data.get("empty_reason"),
        )


@dataclass(frozen=True)
class QueryRecord:
    query: EvalQuery
    route: str | None
    strategy: str
    parsed: ParsedQuery
    filter: FilterDecision
    stages: dict[str, StageRecord] = field(default_factory=dict)
    rule: str | None = None
    # With a router: each single retriever cut to top_k on the same query, filtered as without
    # a router (no exclusions), so routed and unrouted are compared on identical queries.
    baselines: dict[str, StageRecord] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "query_id": self.query.query_id,
            "query": self.query.query,
            "query_type": self.query.query_type,
            "label_status": self.query.label_status,
            "route": self.route,
            "rule": self.rule,
            "strategy": self.strategy,
            "parsed": self.parsed.to_json(),
            "filter": {"applied": list(self.filter.applied), "allowed": self.filter.allowed},
            "stages": {name: stage.to_json() for name, stage in self.stages.items()},
            "baselines": {name: stage.to_json() for name, stage in self.baselines.items()},
        }

    @classmethod
    def from_json(
        cls, data: dict[str, Any], query: EvalQuery, positions: Mapping[str, int]
    ) -> QueryRecord:
        """Back from `to_json` (one line of rankings.jsonl) for `query` as the labels now
        describe it; the filter's mask is not stored (scoring reads only what it applied)."""
        return cls(
            query=query,
            route=data["route"],
            strategy=data["strategy"],
            parsed=ParsedQuery.from_json(data["parsed"]),
            filter=FilterDecision(None, tuple(data["filter"]["applied"])),
            stages={n: StageRecord.from_json(s, positions) for n, s in data["stages"].items()},
            rule=data["rule"],
            baselines={
                n: StageRecord.from_json(s, positions) for n, s in data["baselines"].items()
            },
        )


Router = Callable[[EvalQuery, ParsedQuery], Routing]


def empty_rankings(stages: Sequence[StageRecord | None]) -> dict[str, int]:
    """How many of one stage's rankings are empty, by `empty_reason`: such a query is still
    scored (0: the system was asked and returned nothing), and this says why it returned
    nothing."""
    counts: dict[str, int] = {}
    for stage in stages:
        if stage is not None and not stage.ids:
            reason = stage.empty_reason or NO_CANDIDATES
            counts[reason] = counts.get(reason, 0) + 1
    return dict(sorted(counts.items()))


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
                    strategy.name,
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
        if len(pools) == 1:
            return pools[0]
        if not any(pool.returned for pool in pools):
            # Every arm came back empty: the combination is empty for their reasons.
            reasons = dict.fromkeys(pool.empty_reason or NO_CANDIDATES for pool in pools)
            return replace(pools[0], requested=0, empty_reason="+".join(reasons))
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
