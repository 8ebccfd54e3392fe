"""AP (`map@K`) equals trec_eval's map_cut_K and, uncut, its map, on both scoring paths.

The random runs of the parity tests (graded labels 0..3, heavy score ties, runs shorter than
k, unjudged documents, labels outside the coded pool) are scored by the string path
(`score_stage`) and by the integer core (`per_query_columns_coded`, a job's passage indices),
and each query's value is held to pytrec_eval's to 1e-9.
"""

from __future__ import annotations

import numpy as np
import pytest
import pytrec_eval
from support.random_cases import CODE, coded, random_case

from retrieval_bench.data.trec import run_rankings, trec_order
from retrieval_bench.scoring.aggregate import metric_names, per_query_columns_coded, score_stage
from retrieval_bench.scoring.labels import judge_qrels
from retrieval_bench.scoring.metrics import pad_labels

CUTOFFS = [1, 3, 5, 10, 20]
# Deeper than any random run (at most 30 ids): map@UNCUT is trec_eval's uncut map.
UNCUT = 30


def _theirs(qrels: dict, run: dict) -> dict[str, dict[str, float]]:
    measures = {"map", f"map_cut.{','.join(map(str, CUTOFFS))}"}
    return pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)


@pytest.mark.parametrize("seed", range(4))
def test_map_matches_trec_eval_on_id_strings(seed: int) -> None:
    qrels, run = random_case(seed, 400)
    rankings = run_rankings({q: trec_order(docs.items()) for q, docs in run.items()})
    per_query = score_stage(rankings, judge_qrels(qrels), [*CUTOFFS, UNCUT])["per_query"]
    theirs = _theirs(qrels, run)
    assert per_query
    for q, row in per_query.items():
        for k in CUTOFFS:
            assert row[f"map@{k}"] == pytest.approx(theirs[q][f"map_cut_{k}"], abs=1e-9), (q, k)
        assert row[f"map@{UNCUT}"] == pytest.approx(theirs[q]["map"], abs=1e-9), q


@pytest.mark.parametrize("seed", range(4))
def test_map_matches_trec_eval_on_passage_indices(seed: int) -> None:
    qrels, run = random_case(100 + seed, 400, outside=0.2, returned=(0, 30))
    judgements = judge_qrels(qrels)
    scored = [q for q in judgements.qrels if q in run]
    ranked = [[d for d, _ in trec_order(run[q].items())] for q in scored]
    ids, grades = pad_labels([judgements.qrels[q] for q in scored], CODE)
    ours = per_query_columns_coded(coded(ranked), ids, grades, [*CUTOFFS, UNCUT])
    theirs = _theirs(qrels, run)
    checked = 0
    for i, q in enumerate(scored):
        if not any(g > 0 for g in qrels[q].values()):
            assert np.isnan(ours[f"map@{UNCUT}"][i])  # no relevant id: undefined, not 0
            continue
        for k in CUTOFFS:
            assert ours[f"map@{k}"][i] == pytest.approx(theirs[q][f"map_cut_{k}"], abs=1e-9)
        assert ours[f"map@{UNCUT}"][i] == pytest.approx(theirs[q]["map"], abs=1e-9), q
        checked += 1
    assert checked > 300


def test_map_is_reported_by_default_after_ndcg() -> None:
    names = metric_names([10])
    assert names[names.index("ndcg@10") + 1] == "map@10"


def test_map_hand_computed() -> None:
    # Relevant ids at ranks 1 and 3 of 3 relevant: (1/1 + 2/3) / 3, cut at 2: (1/1) / 3.
    qrels = {"q": {"a": 1, "c": 2, "z": 1, "b": 0}}
    result = score_stage({"q": ["a", "b", "c", "d"]}, judge_qrels(qrels), [2, 4])
    row = result["per_query"]["q"]
    assert row["map@4"] == pytest.approx((1 + 2 / 3) / 3, abs=1e-12)
    assert row["map@2"] == pytest.approx(1 / 3, abs=1e-12)
