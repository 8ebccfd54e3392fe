"""The real Pipeline, fusion and filter with scripted arms: arms that return fixed rankings, so
the final cut, `fill`, RRF and the city filter are checked against values worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import built_combiners
from support.fakes import CITIES, PASSAGES, ScriptedArm

from retrieval_bench.config import RetrieverConfig
from retrieval_bench.config.filters import FilterConfig
from retrieval_bench.job.filters import PassageFilter
from retrieval_bench.job.pipeline import Pipeline
from retrieval_bench.records import NO_CANDIDATES, EvalQuery, QueryRecord
from retrieval_bench.routing.parser import QueryParser
from retrieval_bench.routing.router import build_router
from retrieval_bench.routing.rules import Strategy


def run(
    arms: dict[str, ScriptedArm],
    combine: str = "rrf",
    top_k: int = 4,
    pool_size: int = 10,
    rrf_k: int = 60,
    query: str = "question",
    filters: FilterConfig | None = None,
) -> QueryRecord:
    strategy = Strategy("scripted", tuple(arms), combine)
    route, baselines = build_router(None, strategy, list(arms))
    pipeline = Pipeline(
        PASSAGES,
        arms,
        parse=QueryParser(["三亚", "海口"]).parse,
        passage_filter=PassageFilter(PASSAGES, filters or FilterConfig()),
        route=route,
        pool_size=pool_size,
        top_k=top_k,
        combiners=built_combiners(RetrieverConfig(), rrf_k=rrf_k),
        baselines=baselines,
    )
    [record] = pipeline.run([EvalQuery("q1", query, "t", "reviewed", {"p0": 1})])
    return record


def test_final_cut_keeps_exactly_top_k_of_the_fused_list() -> None:
    record = run({"a": ScriptedArm("a", [0, 1, 2, 3, 4, 5]), "b": ScriptedArm("b", [5, 4, 6])})
    fused, final = record.stages["fused"], record.stages["final"]
    assert final.ids == fused.ids[:4]
    assert final.scores == fused.scores[:4]
    assert (final.pool_requested, final.pool_returned) == (4, 4)
    assert (fused.pool_requested, fused.pool_returned) == (7, 7)


def test_final_cut_of_a_single_arm_is_its_top_k() -> None:
    arm = ScriptedArm("a", [9, 8, 7, 6, 5, 4, 3])
    record = run({"a": arm}, top_k=3, pool_size=5)
    assert arm.ks == [5], "the arm is asked for the pool size, not top_k"
    assert record.stages["a"].ids == ["p9", "p8", "p7", "p6", "p5"]
    assert set(record.stages) == {"a", "final"}
    assert record.stages["final"].ids == ["p9", "p8", "p7"]
    assert record.stages["final"].scores == [10.0, 9.0, 8.0]


def test_final_cut_of_a_short_pool_keeps_what_there_is() -> None:
    record = run({"a": ScriptedArm("a", [2, 1])}, top_k=4)
    final = record.stages["final"]
    assert final.ids == ["p2", "p1"]
    assert (final.pool_requested, final.pool_returned) == (4, 2)


def test_fill_lets_the_first_arm_lead_and_later_arms_fill() -> None:
    record = run(
        {"a": ScriptedArm("a", [0, 1, 2]), "b": ScriptedArm("b", [3, 1, 4, 5])},
        combine="fill",
        top_k=4,
        rrf_k=60,
    )
    assert record.stages["fused"].ids == ["p0", "p1", "p2", "p3", "p4", "p5"]
    assert record.stages["fused"].scores == [1 / 61, 1 / 62, 1 / 63, 1 / 64, 1 / 65, 1 / 66]
    assert record.stages["final"].ids == ["p0", "p1", "p2", "p3"]
    # The order of the arms decides who leads.
    swapped = run(
        {"b": ScriptedArm("b", [3, 1, 4, 5]), "a": ScriptedArm("a", [0, 1, 2])}, combine="fill"
    )
    assert swapped.stages["final"].ids == ["p3", "p1", "p4", "p5"]


@pytest.mark.parametrize("rrf_k", [60, 1])
def test_rrf_equals_the_sum_worked_by_hand(rrf_k: int) -> None:
    record = run(
        {"a": ScriptedArm("a", [0, 1, 2]), "b": ScriptedArm("b", [2, 3, 0, 7])},
        top_k=3,
        rrf_k=rrf_k,
    )
    k = rrf_k
    expected = {
        "p0": 1 / (k + 1) + 1 / (k + 3),
        "p1": 1 / (k + 2),
        "p2": 1 / (k + 3) + 1 / (k + 1),
        "p3": 1 / (k + 2),
        "p7": 1 / (k + 4),
    }
    fused = record.stages["fused"]
    # p0 and p2 tie, as do p1 and p3: id descending breaks the tie, as trec_eval does.
    assert fused.ids == ["p2", "p0", "p3", "p1", "p7"]
    assert fused.scores == pytest.approx([expected[i] for i in fused.ids], abs=0, rel=1e-15)
    assert record.stages["final"].ids == ["p2", "p0", "p3"]


def test_city_filter_restricts_every_arm_before_it_ranks() -> None:
    a, b = ScriptedArm("a", [1, 0, 4, 3, 2]), ScriptedArm("b", [7, 6, 5])
    record = run({"a": a, "b": b}, query="三亚有什么好玩的", top_k=10)
    sanya_or_none = [i for i, c in enumerate(CITIES) if c in ("三亚", "")]
    for arm in (a, b):
        [mask] = arm.masks
        assert mask is not None and np.flatnonzero(mask).tolist() == sanya_or_none
    assert record.parsed.cities == ("三亚",)
    assert record.filter.applied == ("city",) and record.filter.allowed == 7
    assert record.stages["a"].ids == ["p0", "p3", "p2"]
    assert record.stages["b"].ids == ["p6", "p5"]
    assert set(record.stages["final"].ids) == {"p0", "p3", "p2", "p6", "p5"}


def test_an_empty_pool_is_blamed_on_the_filter_only_when_it_allowed_nothing() -> None:
    # The query carries a city mask that allows 7 passages; the arm finds none of them (its
    # script holds only passages the mask drops). Not the filter's doing: it left candidates.
    haikou_only = ScriptedArm("a", [1, 4, 7])  # every one of them is in 海口
    record = run({"a": haikou_only}, query="三亚有什么好玩的")
    assert record.filter.allowed == 7  # the mask allowed passages: the arm simply found none
    assert record.stages["a"].empty_reason == NO_CANDIDATES


def test_no_city_in_the_query_or_city_filter_off_sends_no_mask() -> None:
    a = ScriptedArm("a", [1, 0])
    run({"a": a}, query="哪里好玩")
    b = ScriptedArm("b", [1, 0])
    record = run({"b": b}, query="三亚有什么好玩的", filters=FilterConfig(city=False))
    assert a.masks == [None] and b.masks == [None]
    assert record.stages["final"].ids == ["p1", "p0"]
