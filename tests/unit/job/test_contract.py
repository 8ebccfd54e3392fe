"""The stage contract (job/contract.py): every way an arm, a combiner or a stage can break it is
refused with exit 2 naming the plug-in, the query and the offending value; ties are put in the
project's order; an arm trusted with its own access control is not filtered."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
from conftest import built_combiners, compose_config
from support.fakes import PASSAGES, ScriptedArm

from retrieval_bench.api import evaluate
from retrieval_bench.config import RetrieverConfig
from retrieval_bench.config.filters import FilterConfig
from retrieval_bench.job.contract import ContractError
from retrieval_bench.job.filters import PassageFilter
from retrieval_bench.job.pipeline import Pipeline
from retrieval_bench.plugins import PluginError
from retrieval_bench.protocols import Stage
from retrieval_bench.records import EvalQuery, Ranked
from retrieval_bench.routing.parser import QueryParser
from retrieval_bench.routing.router import build_router
from retrieval_bench.routing.rules import Strategy
from retrieval_bench.stages.cut import TopKCutStage
from run.exits import bad_input_message

QUERY = EvalQuery("q1", "三亚 question", "t", "reviewed", {"p0": 1})


def bad_arm(make: Callable[[int], Any]) -> ScriptedArm:
    """An arm from outside the package whose `search` returns what `make(k)` builds."""
    return ScriptedArm("bad", answer=lambda queries, k, allowed: make(k))


def ranked(indices: Sequence[Any], scores: Sequence[float], k: int = 10) -> Ranked:
    return Ranked(np.asarray(indices), np.asarray(scores, dtype=np.float64), k)


def pipeline(
    arms: dict[str, Any], stages: Sequence[tuple[str, Stage]] | None = None, city: bool = False
) -> Pipeline:
    """The real pipeline over the 10 scripted passages: pool_size 4, top_k 4."""
    strategy = Strategy("s", tuple(arms), "rrf")
    route, _ = build_router(None, strategy, list(arms))
    return Pipeline(
        PASSAGES,
        arms,
        parse=QueryParser(["三亚", "海口"]).parse,
        passage_filter=PassageFilter(PASSAGES, FilterConfig(city=city)),
        route=route,
        pool_size=4,
        top_k=4,
        combiners=built_combiners(RetrieverConfig()),
        stages=stages,
    )


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda k: [ranked([0, 12], [2.0, 1.0])], "index 12 at rank 2 is out of range"),
        (lambda k: [ranked([-1, 2], [2.0, 1.0])], "index -1 at rank 1 is out of range"),
        (lambda k: [ranked([0, 1], [np.nan, 1.0])], "score nan at rank 1"),
        (lambda k: [ranked([0, 1], [2.0, np.inf])], "score inf at rank 2"),
        (lambda k: [], "returned 0 rankings for 1 queries"),
        (lambda k: [ranked([0], [1.0]), ranked([2], [1.0])], "returned 2 rankings for 1 queries"),
        (lambda k: [ranked([3, 3], [2.0, 1.0])], "passage 'p3' (index 3) appears twice"),
        # Not side by side: a check of neighbours alone misses it.
        (lambda k: [ranked([3, 1, 3], [3.0, 2.0, 1.0])], "passage 'p3' (index 3) appears twice"),
        (lambda k: [ranked([0.0, 1.0], [2.0, 1.0])], "indices are float64, not integers"),
        (lambda k: [None], "returned NoneType, not a Ranked"),
        (lambda k: None, "returned NoneType, not a list of Ranked"),
        (lambda k: [ranked([0, 1], [1.0, 2.0])], "not best first: rank 2 (passage 'p1') scores"),
        (lambda k: [ranked(range(k + 1), np.arange(k + 1.0)[::-1])], "5 passages, more than the 4"),
        (lambda k: 1 / 0, "raised ZeroDivisionError: division by zero"),
    ],
)
def test_each_break_of_the_arm_contract_names_the_arm_and_the_query(
    make: Callable[[int], Any], says: str
) -> None:
    # A contract break is a ContractError; an exception inside the arm a PluginError (its base).
    with pytest.raises(PluginError) as refused:
        pipeline({"mine": bad_arm(make)}).run([QUERY])
    message = str(refused.value)
    assert message.startswith("arm 'mine'"), message
    assert says in message
    if "rankings for" not in message and "not a list" not in message and "raised" not in message:
        assert "query q1" in message
    assert bad_input_message(refused.value) == message  # exit 2 with this line (run.exits)


def test_an_arm_that_ignores_the_filter_is_refused() -> None:
    """Query 三亚: the city filter allows passages 0, 2, 5, 8; an arm that ranks 1 (海口)."""
    leaky = bad_arm(lambda k: [ranked([0, 1], [2.0, 1.0])])
    with pytest.raises(ContractError, match=r"passage 'p1' at rank 2 is excluded by the query's"):
        pipeline({"leaky": leaky}, city=True).run([QUERY])


def test_an_arm_trusted_with_its_own_acl_is_not_filtered() -> None:
    leaky = bad_arm(lambda k: [ranked([0, 1], [2.0, 1.0])])
    leaky.applies_own_acl = True  # type: ignore[attr-defined]
    [record] = pipeline({"service": leaky}, city=True).run([QUERY])
    assert record.stages["final"].ids == ["p0", "p1"]


def test_an_own_acl_arm_after_the_first_arm_of_a_fused_strategy_keeps_what_it_let_through() -> None:
    """Under the city filter (三亚: passages 0, 2, 5, 8), a fused strategy whose second arm
    ranks with its own access rules and returns p1 (海口): the fusion may keep p1, since an arm
    trusted with its own ACL let it through, whichever arm it came from."""
    service = bad_arm(lambda k: [ranked([1, 0], [2.0, 1.0])])
    service.applies_own_acl = True  # type: ignore[attr-defined]
    arms = {"plain": ScriptedArm("plain", [0, 2, 5]), "service": service}
    [record] = pipeline(arms, city=True).run([QUERY])
    assert record.stages["plain"].ids == ["p0", "p2", "p5"]
    assert "p1" in record.stages["fused"].ids and "p1" in record.stages["final"].ids


def test_ties_are_put_in_id_descending_order() -> None:
    arm = bad_arm(lambda k: [ranked([1, 4, 2], [2.0, 2.0, 1.0])])
    [record] = pipeline({"a": arm}).run([QUERY])
    assert record.stages["a"].ids == ["p4", "p1", "p2"]


class ReversingStage:
    """A stage that returns its input reversed, scores and all: not best first."""

    def apply(self, queries: Sequence[EvalQuery], rankings: Sequence[Ranked]) -> list[Ranked]:
        return [Ranked(r.indices[::-1], r.scores[::-1], r.requested) for r in rankings]

    def info(self) -> dict[str, Any]:
        return {}


class SmugglingStage:
    """A stage that adds a passage its input did not hold, which the filter excludes."""

    def apply(self, queries: Sequence[EvalQuery], rankings: Sequence[Ranked]) -> list[Ranked]:
        return [
            Ranked(np.append(r.indices, 1), np.append(r.scores, -1.0), r.requested + 1)
            for r in rankings
        ]

    def info(self) -> dict[str, Any]:
        return {}


def test_a_stage_that_breaks_the_contract_is_named() -> None:
    arms = {"a": ScriptedArm("a", [0, 2, 5])}
    with pytest.raises(ContractError, match=r"^stage 'reverse', query q1: not best first"):
        pipeline(arms, [("reverse", ReversingStage()), ("final", TopKCutStage(4))]).run([QUERY])
    stages = [("final", TopKCutStage(4)), ("smuggle", SmugglingStage())]
    with pytest.raises(ContractError, match=r"^stage 'smuggle', query q1: passage 'p1'"):
        pipeline(arms, stages, city=True).run([QUERY])


def test_a_job_with_an_arm_that_ignores_the_filter_exits_2_naming_it() -> None:
    """The issue's case on the shipped travel set: the city filter on, an outside arm that
    ranks every passage whatever `allowed` says."""

    def every_passage(
        queries: Sequence[EvalQuery], k: int, allowed: Sequence[np.ndarray | None]
    ) -> list[Ranked]:
        top = np.arange(k, dtype=np.int64)
        return [Ranked(top, np.linspace(1.0, 0.1, k), k) for _ in queries]

    cfg = compose_config(["retriever=bm25"])
    with pytest.raises(ContractError) as refused:
        evaluate(cfg, arms={"everything": ScriptedArm("everything", answer=every_passage)})
    message = str(refused.value)
    assert message.startswith("arm 'everything', query ") and "excluded by the query's" in message
