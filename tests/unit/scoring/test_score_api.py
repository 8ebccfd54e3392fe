"""`retrieval_bench.score(qrels, run, metrics)`: the library door of `run.score`. TREC files and
dicts score alike, ir_measures' spellings are accepted, `complete` is trec_eval's -c, and the
values equal pytrec_eval's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import pytrec_eval

from retrieval_bench import score
from retrieval_bench.data.trec import write_qrels, write_run
from retrieval_bench.errors import ConfigError


def case(seed: int = 3) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    rng = np.random.default_rng(seed)
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(40):
        docs = [f"d{i:03d}" for i in rng.choice(200, 30, replace=False)]
        qrels[f"q{q}"] = {d: int(rng.integers(0, 4)) for d in docs[:8]}
        run[f"q{q}"] = {d: float(rng.integers(0, 12)) for d in docs[3:28]}
    return qrels, run


def test_dicts_and_trec_files_score_alike_and_equal_pytrec_eval(tmp_path: Path) -> None:
    qrels, run = case()
    write_qrels(tmp_path / "qrels", qrels)
    write_run(tmp_path / "run", {q: list(d.items()) for q, d in run.items()}, tag="t")
    from_dicts = score(qrels, run, ["nDCG@10", "recall@5", "P@10"])
    from_files = score(
        tmp_path / "qrels", tmp_path / "run", ["ndcg@10", "recall@5", "precision@10"]
    )
    assert from_dicts == from_files
    reference = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.5", "P.10"})
    expected = reference.evaluate(run)
    for qid, values in from_dicts.per_query.items():
        assert values["ndcg@10"] == pytest.approx(expected[qid]["ndcg_cut_10"], abs=1e-12)
        assert values["recall@5"] == pytest.approx(expected[qid]["recall_5"], abs=1e-12)
        assert values["precision@10"] == pytest.approx(expected[qid]["P_10"], abs=1e-12)
    mean = np.mean([v["ndcg@10"] for v in from_dicts.per_query.values()])
    assert from_dicts.mean["ndcg@10"] == pytest.approx(mean, abs=1e-12)


def test_complete_scores_a_missing_labelled_query_as_zero() -> None:
    qrels, run = case()
    del run["q0"]
    partial = score(qrels, run, ["ndcg@10"])
    complete = score(qrels, run, ["ndcg@10"], complete=True)
    assert "q0" not in partial.per_query and complete.per_query["q0"]["ndcg@10"] == 0.0
    assert complete.counts["not_in_run_scored_0"] == 1


def test_an_unknown_metric_is_refused_with_the_nearest_name() -> None:
    qrels, run = case()
    with pytest.raises(ConfigError, match=r"'metrics\[0\]'.*did you mean 'ndcg@10'"):
        score(qrels, run, ["ndgc@10"])
