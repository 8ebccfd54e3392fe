"""`active.compared`: the queries of a comparison as arrays, and their metrics computed by the
project's metric functions, equal to what `retrieval_bench.score` gives for the same rankings
and labels."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval_bench.active.compared import Compared, parse_metric
from retrieval_bench.errors import ConfigError
from retrieval_bench.scoring.run_scores import score

TOPS = {
    "a": {"q1": ["p1", "p2", "p3"], "q2": ["p4", "p5"], "q3": ["p7", "p8", "p9"]},
    "b": {"q1": ["p2", "p1", "p6"], "q2": ["p4", "p5"], "q3": ["p9", "p1", "p7"]},
}
LABELS = [{"p2": 1, "p3": 0}, {"p5": 2, "p10": 1}, {"p8": 1, "p1": 0}]


def _compared() -> Compared:
    return Compared.build(["q1", "q2", "q3"], ["x", "y", "x"], TOPS, depth=3)


def test_the_pool_is_each_query_s_union_once_in_ranked_order() -> None:
    c = _compared()
    assert c.pair_ids() == [
        ("q1", "p1"), ("q1", "p2"), ("q1", "p3"), ("q1", "p6"),
        ("q2", "p4"), ("q2", "p5"),
        ("q3", "p7"), ("q3", "p8"), ("q3", "p9"), ("q3", "p1"),
    ]  # fmt: skip
    assert c.pairs_per_query.tolist() == [4, 2, 4]
    assert c.best_ranks().tolist() == [0, 0, 2, 2, 0, 1, 0, 1, 0, 1]
    layout = c.pool_layout()
    assert layout.shape == (3, 4) and layout[1, 2:].tolist() == [-1, -1]


@pytest.mark.parametrize("metric", ["ndcg@3", "recall@2", "mrr@3", "hit@1", "precision@3"])
def test_values_equal_the_scorer_s(metric: str) -> None:
    c = _compared()
    name, k = parse_metric(metric, 3, "--metric")
    codes, grades = c.label_layout(LABELS)
    values = c.values(name, k, codes, grades)
    qrels = dict(zip(["q1", "q2", "q3"], LABELS, strict=True))
    for s, system in enumerate(["a", "b"]):
        run = {q: {pid: 10.0 - r for r, pid in enumerate(ids)} for q, ids in TOPS[system].items()}
        expected = score(qrels, run, [metric]).per_query
        got = dict(zip(["q1", "q2", "q3"], values[s].tolist(), strict=True))
        assert got == pytest.approx({q: row[metric] for q, row in expected.items()})


def test_a_query_without_a_relevant_label_counts_zero_and_pooled_labels_can_be_left_out() -> None:
    c = _compared()
    codes, grades = c.label_layout([{}, {"p10": 1}, {"p1": 0}], skip_pooled=True)
    assert codes[1].tolist() == [-1]  # p10 no system ranked: kept, code -1, grade 1
    assert grades[1].tolist() == [1.0]
    values = c.values("ndcg", 3, codes, grades)
    assert values[:, 0].tolist() == [0.0, 0.0] and values[:, 1].tolist() == [0.0, 0.0]
    assert not np.isnan(values).any()


@pytest.mark.parametrize(
    ("spec", "message"),
    [("ndcg", "cut-off"), ("nope@3", "not a per-query"), ("recall_pooled@3", "per-query"),
     ("ndcg@9", "within 1..3")],
)  # fmt: skip
def test_bad_metrics_are_refused_naming_the_flag(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        parse_metric(spec, 3, "--metric")
    assert "--metric" in str(info.value)
