"""The later stages inside the real Pipeline with scripted arms: rerank before the top_k cut,
context after it, each recorded under its name; and each query's record naming the strategy
its own routing chose."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from conftest import built_combiners
from support.fakes import PASSAGES, ScriptedArm

from retrieval_bench.config import RetrieverConfig
from retrieval_bench.config.filters import FilterConfig
from retrieval_bench.config.stages import ContextConfig
from retrieval_bench.job.filters import PassageFilter
from retrieval_bench.job.pipeline import Pipeline
from retrieval_bench.records import EvalQuery, ParsedQuery, Ranked
from retrieval_bench.routing.parser import QueryParser
from retrieval_bench.routing.rules import Routing, Strategy
from retrieval_bench.stages.context import ContextBuilder
from retrieval_bench.stages.cut import TopKCutStage

BOTH = Strategy("both", ("a", "b"), "rrf")
ONLY_B = Strategy("only_b", ("b",), "rrf")


class ReverseRerank:
    """A rerank stage that keeps the top 3 in reverse order, scored 3, 2, 1."""

    def apply(self, queries: Sequence[EvalQuery], rankings: Sequence[Ranked]) -> list[Ranked]:
        return [Ranked(r.indices[:3][::-1], np.array([3.0, 2.0, 1.0]), 3) for r in rankings]

    def info(self) -> dict[str, Any]:
        return {}


def route(query: EvalQuery, parsed: ParsedQuery) -> Routing:
    """q1 to both arms, q2 to arm b alone."""
    return Routing("r-" + query.query_id, BOTH if query.query_id == "q1" else ONLY_B, "rule")


def test_each_record_names_its_own_strategy_and_records_the_later_stages() -> None:
    arms = {"a": ScriptedArm("a", [0, 1, 2, 3]), "b": ScriptedArm("b", [4, 5, 6, 7])}
    # Passage texts are "text i" (6 characters): a 13-character budget holds two.
    context = ContextBuilder(ContextConfig(budget_chars=13), PASSAGES, [p.text for p in PASSAGES])
    pipeline = Pipeline(
        PASSAGES,
        arms,
        parse=QueryParser(["三亚", "海口"]).parse,
        passage_filter=PassageFilter(PASSAGES, FilterConfig()),
        route=route,
        pool_size=4,
        top_k=2,
        combiners=built_combiners(RetrieverConfig()),
        stages=[("rerank", ReverseRerank()), ("final", TopKCutStage(2)), ("context", context)],
    )
    queries = [EvalQuery(q, "question", "t", "reviewed", {"p0": 1}) for q in ("q1", "q2")]
    first, second = pipeline.run(queries)
    assert (first.strategy, first.route) == ("both", "r-q1")
    assert (second.strategy, second.route) == ("only_b", "r-q2")
    assert list(first.stages) == ["a", "b", "fused", "rerank", "final", "context"]
    assert list(second.stages) == ["b", "rerank", "final", "context"]
    # q2: b's pool 4 5 6 7 -> rerank: its top 3 reversed -> final: top 2 -> context: both fit.
    assert second.stages["rerank"].ids == ["p6", "p5", "p4"]
    assert second.stages["final"].ids == ["p6", "p5"]
    assert second.stages["final"].scores == [3.0, 2.0]
    assert second.stages["context"].ids == ["p6", "p5"]
