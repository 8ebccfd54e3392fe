"""Metric definitions, label states and aggregation: the numbers a reader trusts."""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest

from retrieval_bench.records import EvalQuery
from retrieval_bench.scoring import metrics, registry
from retrieval_bench.scoring.aggregate import metric_names, per_query_columns, score_stage
from retrieval_bench.scoring.labels import Judgements, judge, judge_qrels
from retrieval_bench.scoring.metrics import build_ranked_grades

# The teaching case: macro and pooled recall disagree, and hit / all-hit tell different stories.
TEACHING_QRELS = {"A": {"a": 1, "b": 1, "c": 1}, "B": {"d": 1}, "C": {"e": 1}}
TEACHING_RUN = {"A": ["a", "x", "b", "c"], "B": ["x", "d"], "C": ["x", "y"]}


def test_teaching_case_at_2() -> None:
    result = score_stage(TEACHING_RUN, judge_qrels(TEACHING_QRELS), [2])
    overall = result["overall"]
    assert overall["recall@2"] == pytest.approx(4 / 9, abs=1e-12)
    assert overall["recall_pooled@2"] == pytest.approx(2 / 5, abs=1e-12)
    assert overall["hit@2"] == pytest.approx(2 / 3, abs=1e-12)
    assert overall["all_hit@2"] == pytest.approx(1 / 3, abs=1e-12)
    assert overall["recall_bound@2"] == pytest.approx((2 / 3 + 1 + 1) / 3, abs=1e-12)
    assert overall["n"] == 3
    assert result["counts"] == {
        "scored": 3,
        "excluded": {},
        "not_in_labels": 0,
        "by_type": {"unknown": {"scored": 3, "excluded": {}}},
    }


def test_pooled_recall_is_relevant_weighted_macro_recall() -> None:
    rng = np.random.default_rng(7)
    docs = [f"d{i}" for i in range(40)]
    qrels, run = {}, {}
    for q in range(300):
        n_rel = int(rng.integers(1, 12))
        qrels[f"q{q}"] = {str(d): 1 for d in rng.choice(docs, n_rel, replace=False)}
        run[f"q{q}"] = [str(d) for d in rng.choice(docs, int(rng.integers(0, 25)), replace=False)]
    result = score_stage(run, judge_qrels(qrels), [1, 5, 10, 20])
    sizes = np.array([len(qrels[q]) for q in result["per_query"]])
    for k in (1, 5, 10, 20):
        recalls = np.array([r[f"recall@{k}"] for r in result["per_query"].values()])
        weighted = float((recalls * sizes).sum() / sizes.sum())
        assert result["overall"][f"recall_pooled@{k}"] == pytest.approx(weighted, abs=1e-12)
        assert result["overall"][f"recall@{k}"] == pytest.approx(recalls.mean(), abs=1e-12)


def _rg(ranking: list[str], labels: dict[str, int], k: int) -> metrics.RankedGrades:
    return build_ranked_grades([ranking], [labels], k)


def test_ranked_grades_layout() -> None:
    rg = _rg(["a", "u", "n", "b"], {"a": 2, "n": 0, "b": 3, "c": 1}, 5)
    assert rg.grades.tolist() == [[2.0, 0.0, 0.0, 3.0, 0.0]]
    assert rg.judged.tolist() == [[True, False, True, True, False]]
    assert rg.retrieved.tolist() == [[True, True, True, True, False]]
    assert rg.n_relevant.tolist() == [3]
    assert rg.ideal.tolist() == [[3.0, 2.0, 1.0, 0.0, 0.0]]
    small = rg.truncate(2)
    rebuilt = _rg(["a", "u", "n", "b"], {"a": 2, "n": 0, "b": 3, "c": 1}, 2)
    for name in ("grades", "judged", "retrieved", "n_relevant", "ideal"):
        assert np.array_equal(getattr(small, name), getattr(rebuilt, name))


def test_metric_definitions_by_hand() -> None:
    rg = _rg(["u", "a", "n"], {"a": 2, "b": 1, "n": 0}, 4)
    assert metrics.recall(rg)[0] == 0.5  # 1 of 2 relevant, not 1 of 4 ranks
    assert metrics.recall_bound(rg)[0] == 1.0
    assert metrics.precision(rg)[0] == 0.25  # a short ranking still divides by k
    assert metrics.hit(rg)[0] == 1.0
    assert metrics.all_hit(rg)[0] == 0.0
    assert metrics.mrr(rg)[0] == 0.5
    assert metrics.judged(rg)[0] == 0.5  # a and n judged, u unjudged, rank 4 empty
    dcg = 2 / math.log2(3)
    idcg = 2 / math.log2(2) + 1 / math.log2(3)
    assert metrics.ndcg(rg)[0] == pytest.approx(dcg / idcg, abs=1e-15)
    # The first relevant id past k does not count for mrr@k.
    assert metrics.mrr(rg.truncate(1))[0] == 0.0


def test_recall_bound_caps_at_k() -> None:
    rg = _rg([], {f"r{i}": 1 for i in range(5)}, 2)
    assert metrics.recall_bound(rg)[0] == pytest.approx(2 / 5)
    assert metrics.recall(rg)[0] == 0.0


def test_metrics_without_relevant_ids_are_nan_not_zero() -> None:
    rg = _rg(["a"], {"a": 0}, 3)
    for fn in (metrics.recall, metrics.recall_bound, metrics.all_hit, metrics.ndcg):
        assert math.isnan(fn(rg)[0])


def test_empty_batch() -> None:
    rg = build_ranked_grades([], [], 5)
    assert rg.grades.shape == (0, 5)
    for measure in registry.measures(registry.DOC):
        if measure.fn is not None:
            assert measure.fn(rg).shape == (0,)


def _q(qid: str, status: str, relevance: dict[str, int], qtype: str = "t") -> EvalQuery:
    return EvalQuery(qid, "text", qtype, status, relevance)


def test_label_states_are_excluded_with_reasons(caplog: pytest.LogCaptureFixture) -> None:
    queries = [
        _q("ok", "reviewed", {"p1": 1, "p9": 0}),
        _q("unrev", "unreviewed", {"p1": 1}),
        _q("refuse", "no_answer", {}),
        _q("empty", "reviewed", {}),
        _q("nonrel", "reviewed", {"p1": 0}),
        _q("gone", "reviewed", {"p1": 1, "lost1": 1, "lost2": 2}, qtype="u"),
    ]
    with caplog.at_level(logging.WARNING):
        j = judge(queries, corpus_ids=["p1", "p9"])
    assert list(j.qrels) == ["ok"]
    assert j.qrels["ok"] == {"p1": 1, "p9": 0}
    assert j.excluded == {
        "unrev": "unreviewed",
        "refuse": "no_answer",
        "empty": "no_relevant_ids",
        "nonrel": "no_relevant_ids",
        "gone": "gold_missing_from_corpus",
    }
    assert j.no_answer == ["refuse"]
    assert j.missing_gold == {"gone": ["lost1", "lost2"]}
    assert "gone" in caplog.text and "lost1" in caplog.text and "lost2" in caplog.text
    assert set(j.query_types) == {q.query_id for q in queries}

    # Excluded queries are counted, never scored: the run finds nothing for them, yet the
    # scored numbers are those of "ok" alone.
    run = {q.query_id: ["p1"] for q in queries}
    run["unrev"] = run["empty"] = ["zzz"]
    result = score_stage(run, j, [1])
    assert result["overall"]["recall@1"] == 1.0
    assert set(result["per_query"]) == {"ok"}
    assert result["counts"]["scored"] == 1
    assert result["counts"]["excluded"] == {
        "gold_missing_from_corpus": 1,
        "no_answer": 1,
        "no_relevant_ids": 2,
        "unreviewed": 1,
    }
    by_u = result["by_type"]["u"]
    assert by_u["recall@1"] is None and by_u["n"] == 0
    assert "gold_missing_from_corpus=1" in by_u["undefined"]
    assert result["counts"]["by_type"]["u"] == {
        "scored": 0,
        "excluded": {"gold_missing_from_corpus": 1},
    }


def test_without_corpus_the_gold_check_is_skipped() -> None:
    j = judge([_q("q", "reviewed", {"p": 1})], corpus_ids=None)
    assert j.qrels == {"q": {"p": 1}}


def test_all_excluded_batch_is_undefined_not_zero() -> None:
    j = judge([_q("a", "unreviewed", {"p": 1}), _q("b", "no_answer", {})], corpus_ids=None)
    result = score_stage({"a": ["p"], "b": ["p"]}, j, [5])
    overall = result["overall"]
    for name in metric_names([5]):
        assert overall[name] is None
    assert overall["n"] == 0
    assert overall["undefined"] == "no scorable queries (excluded: no_answer=1, unreviewed=1)"
    assert result["per_query"] == {}


def test_no_queries_at_all_is_undefined() -> None:
    result = score_stage({}, Judgements(), [3])
    assert result["overall"]["undefined"] == "no queries"
    assert result["overall"]["recall@3"] is None


def test_absent_ranking_is_not_in_run_but_empty_ranking_scores_zero() -> None:
    j = judge_qrels({"a": {"p": 1}, "b": {"p": 1}})
    result = score_stage({"a": []}, j, [3])
    assert result["per_query"]["a"]["recall@3"] == 0.0
    assert result["excluded_queries"] == {"b": "not_in_run"}
    assert result["counts"]["excluded"] == {"not_in_run": 1}
    assert result["overall"]["n"] == 1


def test_run_queries_without_labels_are_ignored_and_counted() -> None:
    result = score_stage({"a": ["p"], "zz": ["p"]}, judge_qrels({"a": {"p": 1}}), [1])
    assert result["counts"]["not_in_labels"] == 1
    assert set(result["per_query"]) == {"a"}


@pytest.mark.parametrize("scored", [True, False])
def test_duplicate_id_in_ranking_is_an_error(scored: bool) -> None:
    qrels = {"a": {"p": 1}, "qdup": {"p1": 1 if scored else 0}}
    ranking = ["p1", "p2", "p3", "p2"]  # the duplicate lies past k: still an error
    with pytest.raises(ValueError, match=r"'qdup'.*'p2'"):
        score_stage({"a": ["p"], "qdup": ranking}, judge_qrels(qrels), [2])
    with pytest.raises(ValueError, match=r"ranking #0.*'p2'"):
        build_ranked_grades([ranking], [{}], 2)


def test_per_query_columns_is_what_score_stage_reports() -> None:
    result = score_stage(TEACHING_RUN, judge_qrels(TEACHING_QRELS), [1, 3])
    columns = per_query_columns(list(TEACHING_RUN.values()), list(TEACHING_QRELS.values()), [3, 1])
    for i, record in enumerate(result["per_query"].values()):
        assert {name: column[i] for name, column in columns.items()} == {
            name: value for name, value in record.items() if name != "query_type"
        }


def test_bad_cutoffs_and_string_rankings() -> None:
    j = judge_qrels({"a": {"p": 1}})
    for bad in ([], [0], [-1], [2.5]):
        with pytest.raises(ValueError):
            score_stage({"a": ["p"]}, j, bad)
    with pytest.raises(TypeError):
        score_stage({"a": "p"}, j, [1])


def test_judge_qrels_types_and_unlabelled_queries() -> None:
    j = judge_qrels({"a": {"p": 1}, "b": {"p": 0}}, {"a": "x", "c": "y"})
    assert j.query_types == {"a": "x", "b": "unknown", "c": "y"}
    assert j.excluded == {"b": "no_relevant_ids", "c": "no_relevant_ids"}


def test_aggregates_trace_back_to_per_query() -> None:
    rng = np.random.default_rng(3)
    docs = [f"d{i}" for i in range(30)]
    types = ["alpha", "beta", "gamma"]
    queries, run, city = [], {}, {}
    for i in range(200):
        rel = {str(d): int(rng.integers(0, 4)) for d in rng.choice(docs, 6, replace=False)}
        status = "unreviewed" if i % 17 == 0 else "reviewed"
        queries.append(_q(f"q{i}", status, rel, qtype=types[i % 3]))
        if i % 23:
            run[f"q{i}"] = [str(d) for d in rng.choice(docs, int(rng.integers(0, 15)), False)]
        if i % 5:
            city[f"q{i}"] = ["paris", "lyon"][i % 2]
    result = score_stage(run, judge(queries, docs), [1, 5, 10], group_by={"meta.city": city})
    per_query = result["per_query"]
    names = metric_names([1, 5, 10])

    def check(group: dict, members: list[str]) -> None:
        assert group["n"] == len(members)
        for name in names:
            metric, k = name.split("@")
            if metric == "recall_pooled":
                found = sum(per_query[q][f"hits@{k}"] for q in members)
                total = sum(per_query[q]["n_relevant"] for q in members)
                expected = found / total
            else:
                expected = float(np.mean([per_query[q][name] for q in members]))
            assert group[name] == pytest.approx(expected, abs=1e-12), name

    check(result["overall"], list(per_query))
    for t in types:
        check(result["by_type"][t], [q for q in per_query if per_query[q]["query_type"] == t])
    for value in ("paris", "lyon", "(missing)"):
        members = [q for q in per_query if city.get(q, "(missing)") == value]
        check(result["by_meta.city"][value], members)
    total_excluded = sum(result["counts"]["excluded"].values())
    assert result["counts"]["scored"] + total_excluded == len(queries)
    assert len(result["excluded_queries"]) == total_excluded
    by_city = result["counts"]["by_meta.city"]
    assert sum(c["scored"] for c in by_city.values()) == result["counts"]["scored"]
