"""What the pipeline recorded for each query: every stage's ranked ids and scores, with the
parse, filter and route behind them. The records every later layer (scoring, reports, compare,
outputs) reads, kept at the bottom so none of them imports the pipeline that made them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from retrieval_bench.data.records import EvalQuery
from retrieval_bench.filters import FilterDecision
from retrieval_bench.query_parser import ParsedQuery
from retrieval_bench.retrievers.base import NO_CANDIDATES


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
