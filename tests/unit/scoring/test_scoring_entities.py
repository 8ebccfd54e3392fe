"""Entity-level metrics on hand-made cases, including the edges."""

from __future__ import annotations

import pytest

from retrieval_bench.records import EvalQuery
from retrieval_bench.scoring.entities import (
    NO_EXPECTED_ENTITIES,
    NO_FINDABLE_EXPECTED,
    NO_NEGATIVE_ENTITIES,
    EntityIndex,
    score_entities,
    score_negative_entities,
)

PASSAGE_ENTITIES = {
    "p1": ("A", "B"),
    "p2": ("B", "C"),
    "p3": ("D",),
    "p4": (),
    "secret": ("S",),
}
ACL = {pid: None for pid in PASSAGE_ENTITIES} | {"secret": frozenset({"hr"})}


def q(qid: str, expected: tuple[str, ...] = (), negative: tuple[str, ...] = (), **kw) -> EvalQuery:
    fields = {"label_status": "reviewed", "relevance": {"p1": 1}, **kw}
    return EvalQuery(
        qid, "text", "t", expected_entities=expected, negative_entities=negative, **fields
    )


def index(*extra: str) -> EntityIndex:
    return EntityIndex(PASSAGE_ENTITIES, extra)


def test_entity_recall_and_unexpected_rate_by_hand() -> None:
    queries = {"a": q("a", ("A", "C")), "b": q("b", ("D",))}
    rankings = {"a": ["p1", "p3", "p2"], "b": ["p4"]}
    result = score_entities(rankings, queries, index(), ACL, [1, 3], {"a": "t", "b": "t"})
    a, b = result["per_query"]["a"], result["per_query"]["b"]
    # top 1 of a = p1 -> {A, B}: found A of {A, C}; B unexpected of 2 shown
    assert a["entity_recall@1"] == 0.5 and a["unexpected_entity_rate@1"] == 0.5
    # top 3 -> {A, B, C, D}: both found; B and D unexpected
    assert a["entity_recall@3"] == 1.0 and a["unexpected_entity_rate@3"] == 0.5
    assert a["entities_shown@3"] == 4 and a["unexpected@3"] == 2
    # b's top K names no entity: nothing found, nothing unexpected shown
    assert b["entity_recall@3"] == 0.0 and b["unexpected_entity_rate@3"] == 0.0
    overall = result["overall"]
    assert overall["entity_recall@1"] == pytest.approx((0.5 + 0.0) / 2)
    assert overall["entity_recall_pooled@1"] == pytest.approx(1 / 3)  # 1 found of 3 expected
    assert overall["unexpected_entity_rate_pooled@3"] == pytest.approx(2 / 4)


def test_pooled_entity_recall_is_weighted_macro() -> None:
    queries = {f"q{i}": q(f"q{i}", exp) for i, exp in enumerate([("A",), ("A", "B", "C", "D")])}
    rankings = {"q0": ["p3"], "q1": ["p1", "p2"]}
    result = score_entities(rankings, queries, index(), ACL, [2], dict.fromkeys(queries, "t"))
    rows = result["per_query"].values()
    weighted = sum(r["entity_recall@2"] * r["n_expected"] for r in rows) / sum(
        r["n_expected"] for r in rows
    )
    assert result["overall"]["entity_recall_pooled@2"] == pytest.approx(weighted)


def test_exclusions_no_expected_label_states_and_unfindable() -> None:
    queries = {
        "none": q("none"),
        "unrev": q("unrev", ("A",), label_status="unreviewed"),
        "noans": q("noans", ("A",), label_status="no_answer", relevance={}),
        # S is only in a passage the employee may not read; Z is in no passage at all
        "perm": q("perm", ("S", "Z"), user_role="employee"),
        "partly": q("partly", ("S", "A"), user_role="employee"),
        "hr": q("hr", ("S",), user_role="hr"),
        "absent": q("absent", ("A",)),
    }
    rankings = {k: ["secret", "p1"] for k in queries if k != "absent"}
    result = score_entities(rankings, queries, index("Z"), ACL, [2], dict.fromkeys(queries, "t"))
    assert result["excluded_queries"] == {
        "none": NO_EXPECTED_ENTITIES,
        "unrev": "unreviewed",
        "noans": "no_answer",
        "perm": NO_FINDABLE_EXPECTED,
        "absent": "not_in_run",
    }
    partly = result["per_query"]["partly"]
    assert partly["n_expected"] == 1 and partly["n_expected_unfindable"] == 1
    assert partly["entity_recall@2"] == 1.0  # A found; S not counted (unreadable)
    assert result["per_query"]["hr"]["entity_recall@2"] == 1.0


def test_all_excluded_is_undefined() -> None:
    result = score_entities({"a": ["p1"]}, {"a": q("a")}, index(), ACL, [1], {"a": "t"})
    assert result["overall"]["entity_recall@1"] is None
    assert result["overall"]["undefined"].startswith("no scorable queries")


def test_negative_entity_rate() -> None:
    queries = {"a": q("a", negative=("B", "D")), "b": q("b", negative=("C",)), "c": q("c")}
    rankings = {"a": ["p1", "p4"], "b": [], "c": ["p1"]}
    result = score_negative_entities(rankings, queries, index(), [2], dict.fromkeys(queries, "t"))
    assert result["per_query"]["a"]["negative_entity_rate@2"] == 0.5  # B appears, D does not
    assert result["per_query"]["a"]["negative_any@2"] == 1.0
    assert result["per_query"]["b"]["negative_entity_rate@2"] == 0.0  # empty top K
    assert result["excluded_queries"] == {"c": NO_NEGATIVE_ENTITIES}
    assert result["overall"]["negative_entity_rate_pooled@2"] == pytest.approx(1 / 3)


def test_lookups_of_only_the_passages_with_the_field_score_the_same() -> None:
    """ScoringContext lists only the passages that have `acl` / `entities` (a 10M corpus has
    mostly neither): a passage absent from the lookups is public and names no entity, so every
    entity and leak figure is the one the full lookups give."""
    from retrieval_bench.scoring.permissions import unreadable_matrix

    queries = {
        "a": q("a", ("A", "S"), ("C",), user_role="hr"),
        "b": q("b", ("D", "S"), ("B",), user_role="intern"),
        "c": q("c", ("B",), ("D",)),
    }
    rankings = {"a": ["p4", "secret", "p2"], "b": ["secret", "p4", "p3"], "c": ["p4", "p1"]}
    types = dict.fromkeys(queries, "t")
    sparse_acl = {pid: acl for pid, acl in ACL.items() if acl is not None}
    sparse_index = EntityIndex({p: e for p, e in PASSAGE_ENTITIES.items() if e}, ("Z",))
    full = (index("Z"), ACL)
    for entities, acl in (full, (sparse_index, sparse_acl)):
        got = (
            score_entities(rankings, queries, entities, acl, [1, 2, 3], types),
            score_negative_entities(rankings, queries, entities, [1, 3], types),
            [
                m.tolist()
                for m in unreadable_matrix(list(rankings.values()), ["hr", "intern", None], acl, 3)
            ],
        )
        if acl is ACL:
            expected = got
    assert got == expected
