"""Each query through parse -> filter -> arms -> fuse -> cut, with every stage recorded."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from retrieval_bench.data.records import EvalQuery, Passage
from retrieval_bench.filters import FilterDecision, PassageFilter
from retrieval_bench.query_parser import ParsedQuery
from retrieval_bench.retrievers.base import Ranked, Retriever, TieBreak
from retrieval_bench.retrievers.fusion import reciprocal_rank_fusion

COMBINERS = ("rrf", "fill")


@dataclass(frozen=True)
class Strategy:
    """How one query is answered: which arms, and how their pools become one list.

    `rrf` fuses all pools; `fill` keeps the first arm's pool in order and lets later arms
    fill the places it leaves empty.
    """

    name: str
    arms: tuple[str, ...]
    combine: str = "rrf"


@dataclass(frozen=True)
class StageRecord:
    ids: list[str]
    scores: list[float]
    pool_requested: int
    pool_returned: int

    def to_json(self) -> dict[str, Any]:
        return {
            "ids": self.ids,
            "scores": self.scores,
            "pool_requested": self.pool_requested,
            "pool_returned": self.pool_returned,
        }


@dataclass(frozen=True)
class QueryRecord:
    query: EvalQuery
    route: str | None
    strategy: str
    parsed: ParsedQuery
    filter: FilterDecision
    stages: dict[str, StageRecord] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "query_id": self.query.query_id,
            "query": self.query.query,
            "query_type": self.query.query_type,
            "label_status": self.query.label_status,
            "route": self.route,
            "strategy": self.strategy,
            "parsed": self.parsed.to_json(),
            "filter": {"applied": list(self.filter.applied), "allowed": self.filter.allowed},
            "stages": {name: stage.to_json() for name, stage in self.stages.items()},
        }


Router = Callable[[EvalQuery, ParsedQuery], tuple[str | None, Strategy]]


class Pipeline:
    def __init__(
        self,
        passages: Sequence[Passage],
        arms: Mapping[str, Retriever],
        parse: Callable[[str], ParsedQuery],
        passage_filter: PassageFilter,
        route: Router,
        pool_size: int,
        top_k: int,
        rrf_k: int,
    ) -> None:
        self.ids = [p.id for p in passages]
        self.arms = arms
        self.parse = parse
        self.passage_filter = passage_filter
        self.route = route
        self.pool_size = pool_size
        self.top_k = top_k
        self.rrf_k = rrf_k
        self.tie_break = TieBreak(self.ids)

    def run(self, queries: Sequence[EvalQuery]) -> list[QueryRecord]:
        parsed = [self.parse(q.query) for q in queries]
        routed = [self.route(q, p) for q, p in zip(queries, parsed, strict=True)]
        decisions = [
            self.passage_filter.decide(p.cities, q.user_role, p.excluded_entities)
            for q, p in zip(queries, parsed, strict=True)
        ]
        # Each arm ranks, in one batch, every query whose strategy uses it.
        pools: list[dict[str, Ranked]] = [{} for _ in queries]
        for arm_name, arm in self.arms.items():
            members = [i for i, (_, s) in enumerate(routed) if arm_name in s.arms]
            if not members:
                continue
            ranked = arm.search(
                [queries[i].query for i in members],
                self.pool_size,
                [decisions[i].mask for i in members],
            )
            for i, result in zip(members, ranked, strict=True):
                pools[i][arm_name] = result
        records = []
        for query, parse, (route, strategy), decision, arm_pools in zip(
            queries, parsed, routed, decisions, pools, strict=True
        ):
            stages = {name: self._stage(arm_pools[name]) for name in strategy.arms}
            combined = self._combine(strategy, [arm_pools[name] for name in strategy.arms])
            if len(strategy.arms) > 1:
                stages["fused"] = self._stage(combined)
            final = Ranked(
                combined.indices[: self.top_k], combined.scores[: self.top_k], self.top_k
            )
            stages["final"] = self._stage(final)
            records.append(QueryRecord(query, route, strategy.name, parse, decision, stages))
        return records

    def _combine(self, strategy: Strategy, pools: list[Ranked]) -> Ranked:
        if len(pools) == 1:
            return pools[0]
        if strategy.combine == "rrf":
            return reciprocal_rank_fusion(pools, self.rrf_k, self.tie_break)
        # "fill": the first arm leads; later arms add unseen passages after it. Scores are the
        # rank-derived 1/(k + position) so the list stays score-descending as TREC needs.
        seen: dict[int, None] = {}
        for pool in pools:
            for index in pool.indices.tolist():
                seen.setdefault(index, None)
        indices = np.fromiter(seen, dtype=np.int64, count=len(seen))
        scores = 1.0 / (self.rrf_k + np.arange(1, len(indices) + 1, dtype=np.float64))
        return Ranked(indices=indices, scores=scores, requested=len(indices))

    def _stage(self, ranked: Ranked) -> StageRecord:
        return StageRecord(
            ids=[self.ids[i] for i in ranked.indices.tolist()],
            scores=[float(s) for s in ranked.scores.tolist()],
            pool_requested=ranked.requested,
            pool_returned=ranked.returned,
        )
