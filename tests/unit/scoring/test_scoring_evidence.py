"""Evidence chains: hops, all-versus-any, curves, and exclusions."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest

from retrieval_bench.records import EvalQuery
from retrieval_bench.scoring.evidence import UNREADABLE_HOP, hop_ranks, score_evidence
from retrieval_bench.scoring.labels import judge

CORPUS = {"a1", "a2", "b1", "c1", "r1", "r2", "secret", "x", "y"}
ACL = dict.fromkeys(CORPUS) | {"secret": frozenset({"hr"})}


def query(qid: str, relevant: list[str], hops: tuple[tuple[str, ...], ...] = (), **kw) -> EvalQuery:
    return EvalQuery(
        qid,
        "text",
        kw.pop("query_type", "t"),
        "reviewed",
        dict.fromkeys(relevant, 1),
        hops=hops,
        **kw,
    )


def score(queries: list[EvalQuery], rankings: dict[str, list[str]], cutoffs: list[int]) -> dict:
    lookup = {q.query_id: q for q in queries}
    return score_evidence(rankings, judge(queries, CORPUS), lookup, ACL, cutoffs, CORPUS)


def test_two_hop_chain_with_alternatives() -> None:
    # hop 1 accepts a1 or a2, hop 2 needs b1
    q = query("q", ["a1", "a2", "b1"], hops=(("a1", "a2"), ("b1",)))
    result = score([q], {"q": ["a2", "x", "b1", "a1"]}, [1, 3, 4])
    row = result["per_query"]["q"]
    assert row["n_hops"] == 2
    assert [row[f"hops_found@{k}"] for k in (1, 3, 4)] == [1, 2, 2]
    assert row["hop_recall@1"] == 0.5
    assert [row[f"evidence_chain@{k}"] for k in (1, 3, 4)] == [0.0, 1.0, 1.0]
    # every id of every hop (a1 too) only by depth 4; any id already at depth 1
    assert [row[f"evidence_all@{k}"] for k in (1, 3, 4)] == [0.0, 0.0, 1.0]
    assert row["evidence_any@1"] == 1.0
    assert result["by_hops"]["2"]["n"] == 1


def test_query_without_hops_is_a_one_hop_chain() -> None:
    q = query("q", ["r1", "r2"])
    row = score([q], {"q": ["x", "r2"]}, [2])["per_query"]["q"]
    assert row["n_hops"] == 1
    assert row["evidence_chain@2"] == row["evidence_any@2"] == 1.0  # = hit@2
    assert row["evidence_all@2"] == 0.0  # = all_hit@2


def test_ladder_all_chain_any_and_monotone_curves() -> None:
    rng = np.random.default_rng(3)
    ids = sorted(CORPUS - {"secret"})
    queries, rankings = [], {}
    for i in range(40):
        hops = tuple(
            tuple(rng.choice(ids, int(rng.integers(1, 3)), replace=False))
            for _ in range(int(rng.integers(1, 4)))
        )
        relevant = sorted({p for hop in hops for p in hop})
        queries.append(query(f"q{i}", relevant, hops=hops))
        rankings[f"q{i}"] = [str(p) for p in rng.permutation(ids)[: int(rng.integers(0, 8))]]
    result = score(queries, rankings, [1, 3, 5])
    for row in result["per_query"].values():
        for k in (1, 3, 5):
            assert (
                row[f"evidence_all@{k}"] <= row[f"evidence_chain@{k}"] <= row[f"evidence_any@{k}"]
            )
    for curve in result["curves"]["by_hops"].values():
        for name in ("evidence_chain", "hop_recall"):
            values = curve[name]
            assert all(a <= b for a, b in pairwise(values)), name
    # the curve at k equals the aggregate at that cut-off
    for hops, curve in result["curves"]["by_hops"].items():
        assert curve["evidence_chain"][2] == pytest.approx(
            result["by_hops"][hops]["evidence_chain@3"]
        )
    assert result["curves"]["k"] == [1, 2, 3, 4, 5]


def test_exclusions_unreadable_hop_and_labels() -> None:
    perm = query("perm", ["secret"], user_role="employee")
    hops_perm = query("hp", ["a1", "secret"], hops=(("a1",), ("secret",)), user_role="employee")
    ok_hr = query("hr", ["a1", "secret"], hops=(("a1",), ("secret",)), user_role="hr")
    partly = query("partly", ["a1", "secret"], hops=(("a1", "secret"),), user_role="employee")
    unrev = EvalQuery("u", "t", "t", "unreviewed", {"a1": 1})
    noans = EvalQuery("n", "t", "t", "no_answer", {})
    rankings = {q: ["secret", "a1"] for q in ("perm", "hp", "hr", "partly", "u", "n")}
    result = score([perm, hops_perm, ok_hr, partly, unrev, noans], rankings, [2])
    assert result["excluded_queries"] == {
        "perm": UNREADABLE_HOP,
        "hp": UNREADABLE_HOP,
        "u": "unreviewed",
        "n": "no_answer",
    }
    assert result["per_query"]["hr"]["evidence_chain@2"] == 1.0
    # partly: the hop keeps its readable alternative a1, which is found
    assert result["per_query"]["partly"]["evidence_all@2"] == 1.0


def test_hop_ids_missing_from_corpus_exclude_the_query() -> None:
    q = query("q", ["a1"], hops=(("a1",), ("ghost",)))
    result = score([q], {"q": ["a1"]}, [1])
    assert result["excluded_queries"] == {"q": "gold_missing_from_corpus"}
    assert result["overall"]["evidence_chain@1"] is None


def test_hop_ranks_empty_batch() -> None:
    ranks = hop_ranks([], [])
    assert ranks["hop_rank"].shape[0] == 0
