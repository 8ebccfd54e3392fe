"""Permissions: leak@K and readable recall on hand-made cases, and the filter end to end."""

from __future__ import annotations

import pytest
from conftest import built_combiners
from support.fakes import ScriptedArm

from retrieval_bench.config import RetrieverConfig
from retrieval_bench.config.filters import FilterConfig
from retrieval_bench.job.filters import PassageFilter
from retrieval_bench.job.pipeline import Pipeline
from retrieval_bench.records import EvalQuery, ParsedQuery, Passage
from retrieval_bench.routing.rules import Routing, Strategy
from retrieval_bench.scoring.labels import judge_qrels
from retrieval_bench.scoring.permissions import (
    NO_READABLE_RELEVANT,
    NO_USER_ROLE,
    leak_columns,
    may_read,
    readable_judgements,
    score_leak,
    score_readable,
    unreadable_queries,
)

ACL = {"pub": None, "hr1": frozenset({"hr"}), "mgr1": frozenset({"hr", "manager"}), "x": None}


def test_may_read() -> None:
    assert may_read("employee", None)
    assert may_read("hr", frozenset({"hr"}))
    assert not may_read("employee", frozenset({"hr"}))
    assert not may_read("employee", frozenset())  # an empty ACL: nobody
    assert may_read(None, frozenset({"hr"}))  # no asker: not permission-scoped


def test_leak_columns_by_hand() -> None:
    rankings = [["hr1", "pub", "mgr1"], ["hr1", "pub", "mgr1"], [], ["unknown-id", "hr1"], ["hr1"]]
    roles = ["employee", "manager", "employee", "hr", "employee"]
    cols = leak_columns(rankings, roles, ACL, [2, 3])
    assert cols["leaked@2"].tolist() == [1, 1, 0, 0, 1]
    assert cols["leaked@3"].tolist() == [2, 1, 0, 0, 1]
    assert cols["shown@3"].tolist() == [3, 3, 0, 2, 1]
    # Divided by K, not by what was shown: one leak among one passage shown is 1/3 at K=3.
    assert cols["leak@3"].tolist() == pytest.approx([2 / 3, 1 / 3, 0.0, 0.0, 1 / 3])
    assert cols["leak@2"].tolist() == pytest.approx([1 / 2, 1 / 2, 0.0, 0.0, 1 / 2])
    assert cols["leak_any@2"].tolist() == [1.0, 1.0, 0.0, 0.0, 1.0]


def test_score_leak_macro_pooled_and_exclusions() -> None:
    rankings = {"a": ["hr1", "pub"], "b": ["pub"], "c": ["hr1"], "d": ["pub"]}
    roles = {"a": "employee", "b": "employee", "c": None, "d": "employee", "e": "employee"}
    types = dict.fromkeys(roles, "t")
    result = score_leak(rankings, types, roles, ACL, [2])
    assert result["counts"]["scored"] == 3
    assert result["counts"]["excluded"] == {NO_USER_ROLE: 1, "not_in_run": 1}
    overall = result["overall"]
    assert overall["leak@2"] == pytest.approx((1 / 2 + 0 + 0) / 3)
    # pooled: sum leaked / sum shown = 1 / (2 + 1 + 1); the shown-weighted mean of leaked/shown
    rows = result["per_query"].values()
    weighted = sum(r["leaked@2"] for r in rows) / sum(r["shown@2"] for r in rows)
    assert overall["leak_pooled@2"] == pytest.approx(1 / 4) == pytest.approx(weighted)
    assert overall["leak_any@2"] == pytest.approx(1 / 3)


def test_leak_pooled_is_undefined_when_nothing_was_shown() -> None:
    result = score_leak({"a": []}, {"a": "t"}, {"a": "employee"}, ACL, [3])
    assert result["overall"]["leak@3"] == 0.0
    assert result["overall"]["leak_pooled@3"] is None


def test_readable_judgements_drop_unreadable_and_exclude_all_unreadable() -> None:
    j = judge_qrels({"q1": {"hr1": 1, "pub": 1}, "q2": {"hr1": 1, "mgr1": 2}, "q3": {"hr1": 1}})
    roles = {"q1": "employee", "q2": "employee", "q3": "hr"}
    readable = readable_judgements(j, roles, ACL)
    assert readable.qrels == {"q1": {"pub": 1}, "q3": {"hr1": 1}}
    assert readable.excluded["q2"] == NO_READABLE_RELEVANT
    assert unreadable_queries(j, roles, ACL) == ["q2"]
    result = score_readable({"q1": ["hr1", "pub"], "q3": ["x"]}, j, roles, ACL, [2])
    assert result["per_query"]["q1"]["readable_recall@2"] == 1.0  # 1 readable of 1
    assert result["per_query"]["q3"]["readable_recall@2"] == 0.0
    assert result["counts"]["excluded"] == {NO_READABLE_RELEVANT: 1}
    assert "readable_recall_pooled@2" in result["overall"]


def test_all_unreadable_batch_is_undefined() -> None:
    j = judge_qrels({"q": {"hr1": 1}})
    result = score_readable({"q": ["pub"]}, j, {"q": "employee"}, ACL, [1])
    assert result["overall"]["readable_recall@1"] is None
    assert "no_readable_relevant=1" in result["overall"]["undefined"]


@pytest.mark.parametrize("permissions", [True, False])
def test_permission_filter_makes_leak_exactly_zero(permissions: bool) -> None:
    passages = [
        Passage("hr1", "salary bands", meta={"acl": ["hr"]}),
        Passage("mgr1", "bonus", meta={"acl": ["hr", "manager"]}),
        Passage("pub", "leave policy"),
        Passage("x", "vpn"),
    ]
    queries = [
        EvalQuery("q1", "salary", "permission", "reviewed", {"hr1": 1}, user_role="employee"),
        EvalQuery("q2", "leave", "policy", "reviewed", {"pub": 1}, user_role="manager"),
    ]
    strategy = Strategy("all", ("all",))
    pipeline = Pipeline(
        passages,
        {"all": ScriptedArm("all", range(4))},
        parse=lambda text: ParsedQuery(),
        passage_filter=PassageFilter(passages, FilterConfig(permissions=permissions)),
        route=lambda q, p: Routing(None, strategy),
        pool_size=4,
        top_k=4,
        combiners=built_combiners(RetrieverConfig()),
    )
    records = pipeline.run(queries)
    rankings = {r.query.query_id: r.stages["final"].ids for r in records}
    roles = {q.query_id: q.user_role for q in queries}
    acl = {p.id: None if "acl" not in p.meta else frozenset(p.meta["acl"]) for p in passages}
    result = score_leak(rankings, {"q1": "permission", "q2": "policy"}, roles, acl, [4])
    if permissions:
        # Each role ranks exactly what it may read: public passages included.
        assert rankings == {"q1": ["pub", "x"], "q2": ["mgr1", "pub", "x"]}
        assert result["overall"]["leak@4"] == 0.0
        assert result["overall"]["leak_any@4"] == 0.0
    else:
        assert rankings == {"q1": ["hr1", "mgr1", "pub", "x"], "q2": ["hr1", "mgr1", "pub", "x"]}
        # q1 (employee) sees hr1 and mgr1; q2 (manager) sees hr1.
        assert result["per_query"]["q1"]["leaked@4"] == 2
        assert result["per_query"]["q2"]["leaked@4"] == 1
        assert result["overall"]["leak@4"] == (2 / 4 + 1 / 4) / 2
