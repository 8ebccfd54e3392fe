"""Refusal: populations, the threshold table's monotone curves, the balanced threshold."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval_bench.config.refusal import RefusalConfig
from retrieval_bench.errors import ConfigError
from retrieval_bench.records import EvalQuery
from retrieval_bench.scoring.labels import judge
from retrieval_bench.scoring.refusal import (
    STAGE_NOT_RECORDED,
    balanced_threshold,
    choose_stage,
    score_refusal,
    threshold_table,
)


def _queries() -> list[EvalQuery]:
    return [
        EvalQuery("a1", "t", "fact", "reviewed", {"p": 1}),
        EvalQuery("a2", "t", "fact", "reviewed", {"p": 1}),
        EvalQuery("a3", "t", "fact", "reviewed", {"p": 1}),
        EvalQuery("n1", "t", "no_answer", "no_answer", {}),
        EvalQuery("n2", "t", "no_answer", "no_answer", {}),
        EvalQuery("perm", "t", "permission", "reviewed", {"secret": 1}),
        EvalQuery("u", "t", "fact", "unreviewed", {"p": 1}),
    ]


def test_populations_counts_and_balanced_threshold() -> None:
    scores = {
        "a1": [0.9, 0.1],
        "a2": [0.7],
        "a3": [0.4],
        "n1": [0.5],
        "n2": [0.2],
        "perm": [0.3],
        "u": [0.8],
    }
    result = score_refusal(scores, judge(_queries()), ["perm"], "dense", 5)
    assert result["stage"] == "dense"
    assert result["counts"] == {
        "scored": 6,
        "should_answer": 3,
        "should_refuse": {"no_answer": 2, "no_readable_relevant": 1},
        "excluded": {"unreviewed": 1},
    }
    # t = 0.5: answers a1 a2 (2/3), refuses n2 perm (2/3): the rates are equal there
    assert result["balanced"]["threshold"] == pytest.approx(0.5)
    assert result["balanced"]["answered_rate"] == pytest.approx(2 / 3)
    assert result["balanced"]["refused_rate"] == pytest.approx(2 / 3)
    # t = 0.4: answers a1 a2 a3 (3/3), refuses n2 perm (2/3) -> mean 5/6, the best there is
    best_mean = result["balanced"]["best_mean"]
    assert best_mean["threshold"] == pytest.approx(0.4)
    assert best_mean["answered_rate"] == 1.0 and best_mean["refused_rate"] == pytest.approx(2 / 3)
    assert result["per_query"]["perm"] == {
        "query_type": "permission",
        "should": "refuse",
        "reason": "no_readable_relevant",
        "top_score": 0.3,
    }
    assert result["at_balanced_by_type"]["no_answer"]["correct_rate"] == 0.5  # n2 refused
    table = result["table"]
    assert table["threshold"][0] == pytest.approx(0.2) and table["threshold"][-1] == 0.9
    assert len(table["threshold"]) == 5


def test_empty_ranking_is_always_refused_and_missing_stage_is_excluded() -> None:
    scores = {"a1": [], "a2": [0.5], "n1": [], "n2": [0.6], "perm": [0.1]}
    result = score_refusal(scores, judge(_queries()), ["perm"], "dense", 3)
    assert result["per_query"]["a1"]["top_score"] is None
    assert result["excluded_queries"]["a3"] == STAGE_NOT_RECORDED
    for t, answered in zip(result["table"]["threshold"], result["table"]["answered"], strict=True):
        assert answered <= 1, t  # a1 never answers


def test_curves_are_monotone_in_the_threshold() -> None:
    rng = np.random.default_rng(11)
    sa, sr = rng.normal(0.6, 0.15, 200), rng.normal(0.4, 0.15, 80)
    grid = np.linspace(-0.2, 1.2, 57)
    table = threshold_table(sa, sr, grid)
    answered, refused = np.array(table["answered_rate"]), np.array(table["refused_rate"])
    assert np.all(np.diff(answered) <= 0) and np.all(np.diff(refused) >= 0)
    assert answered[0] == 1.0 and refused[0] == 0.0 and answered[-1] == 0.0 and refused[-1] == 1.0
    best = balanced_threshold(sa, sr)
    # no candidate threshold does better than the one chosen
    cands = np.unique(np.concatenate([sa, sr]))
    full = threshold_table(sa, sr, cands)
    answered_all, refused_all = np.array(full["answered_rate"]), np.array(full["refused_rate"])
    means = (answered_all + refused_all) / 2
    assert best["best_mean"]["balanced_accuracy"] == pytest.approx(means.max())
    gap = abs(best["answered_rate"] - best["refused_rate"])
    assert gap == pytest.approx(np.abs(answered_all - refused_all).min())


def test_balanced_is_undefined_without_a_population() -> None:
    only_answerable = [EvalQuery("a", "t", "fact", "reviewed", {"p": 1})]
    result = score_refusal({"a": [0.5]}, judge(only_answerable), [], "final", 4)
    assert result["balanced"] == {"threshold": None, "undefined": "no should-refuse queries"}
    result = score_refusal({}, judge(only_answerable), [], "fused", 4)
    assert "recorded no ranking" in result["balanced"]["undefined"]


def test_choose_stage_and_config() -> None:
    assert choose_stage("auto", [{"bm25", "dense", "final"}]) == "dense"
    assert choose_stage("auto", [{"bm25", "final"}, {"bm25", "dense", "final"}]) == "bm25"
    assert choose_stage("auto", [{"final"}]) == "final"
    assert choose_stage("fused", [{"final"}, {"fused", "final"}]) == "fused"
    # Any recorded stage may decide; one no query recorded is refused with the recorded ones.
    with pytest.raises(ConfigError) as refused:
        choose_stage("rrf", [["bm25", "final"]])
    assert str(refused.value) == (
        "config key 'refusal.score_stage': 'rrf' is not a stage this job records; "
        "known: auto, bm25, final"
    )
    with pytest.raises(ConfigError, match=r"did you mean 'rerank'.*known: auto, rerank, final"):
        choose_stage("rerank2", [["rerank", "final"]])
    with pytest.raises(ConfigError, match=r"refusal\.score_stage"):
        RefusalConfig(score_stage=" ").validate()
    with pytest.raises(ConfigError, match=r"refusal\.thresholds"):
        RefusalConfig(thresholds=1).validate()
