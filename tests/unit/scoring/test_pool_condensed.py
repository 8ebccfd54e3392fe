"""Condensed-list metrics (`<metric>_condensed@K`) equal trec_eval on the condensed run, and
judged@K counts explicitly judged non-relevant passages.

The condensed run is the run with every unjudged document removed (Sakai's condensed list,
ir_measures' "judged only"); pytrec_eval scores it as it stands. Random data: graded labels
0..3 (0 = judged non-relevant), heavy score ties, runs shorter and longer than K, queries with
nothing judged in their run, and the coded (job) path beside the string path.
"""

from __future__ import annotations

import numpy as np
import pytest
import pytrec_eval
from support.random_cases import Qrels, Run, random_case

from retrieval_bench.data.trec import trec_order
from retrieval_bench.scoring.aggregate import per_query_columns, per_query_columns_coded
from retrieval_bench.scoring.metrics import build_ranked_grades, condense, pad_labels, pad_rankings

CUTOFFS = [1, 3, 5, 10]
POOL = [f"d{i}" for i in range(60)]
CODE = {doc: i for i, doc in enumerate(POOL)}


def _random_case(seed: int, n_queries: int) -> tuple[Qrels, Run]:
    """Every query has a relevant id (it is scored), heavy ties, runs of 1 to 39 ids."""
    return random_case(
        seed,
        n_queries,
        pool=POOL,
        judged=15,
        nothing_relevant=0.0,
        absent=0.0,
        returned=(1, 40),
        ties=1.0,
        tie_levels=5,
    )


def _trec_eval_on_condensed(qrels: dict, run: dict, k: int) -> dict[str, dict[str, float]]:
    """pytrec_eval's ndcg_cut_k, recall_k, success_k, and recip_rank of the condensed run cut
    to k (mrr@k), per query; a query whose condensed run is empty is absent."""
    condensed = {q: {d: s for d, s in docs.items() if d in qrels[q]} for q, docs in run.items()}
    condensed = {q: docs for q, docs in condensed.items() if docs}
    cut = {q: dict(trec_order(docs.items())[:k]) for q, docs in condensed.items()}
    measures = {f"ndcg_cut.{k}", f"recall.{k}", f"success.{k}"}
    full = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(condensed)
    rr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(cut)
    return {
        q: {
            f"ndcg_condensed@{k}": v[f"ndcg_cut_{k}"],
            f"recall_condensed@{k}": v[f"recall_{k}"],
            f"hit_condensed@{k}": v[f"success_{k}"],
            f"mrr_condensed@{k}": rr[q]["recip_rank"],
        }
        for q, v in full.items()
    }


@pytest.mark.parametrize("seed", range(4))
def test_condensed_metrics_equal_trec_eval_on_the_condensed_run(seed: int) -> None:
    qrels, run = _random_case(seed, 300)
    qids = list(run)
    ranked = [[d for d, _ in trec_order(run[q].items())] for q in qids]
    labels = [qrels[q] for q in qids]
    ours = per_query_columns(ranked, labels, CUTOFFS, qids)
    ids, grades = pad_labels(labels, CODE)
    coded_rankings = pad_rankings([np.array([CODE[d] for d in r]) for r in ranked])
    coded = per_query_columns_coded(coded_rankings, ids, grades, CUTOFFS)
    empty_condensed = 0
    for k in CUTOFFS:
        theirs = _trec_eval_on_condensed(qrels, run, k)
        for name in ("ndcg", "recall", "hit", "mrr"):
            key = f"{name}_condensed@{k}"
            np.testing.assert_array_equal(ours[key], coded[key], err_msg=key)
            for i, qid in enumerate(qids):
                if qid in theirs:
                    assert ours[key][i] == pytest.approx(theirs[qid][key], abs=1e-12), (qid, key)
                else:  # nothing judged in the run: an empty condensed list finds nothing
                    assert ours[key][i] == 0.0, (qid, key)
                    empty_condensed += 1
    assert empty_condensed > 0  # the case is exercised


def test_condensing_moves_judged_passages_up_past_unjudged_ones() -> None:
    """A ranking u1 u2 r n u3 r2 (u: unjudged, n: judged non-relevant, r: relevant) condenses
    to r n r2: at K=2 the plain list holds no label, the condensed list r and n."""
    ranking = ["u1", "u2", "r", "n", "u3", "r2"]
    qrels = {"r": 1, "n": 0, "r2": 2}
    columns = per_query_columns([ranking], [qrels], [2])
    assert columns["judged@2"].tolist() == [0.0]
    assert columns["recall@2"].tolist() == [0.0]
    assert columns["recall_condensed@2"].tolist() == [0.5]
    assert columns["mrr_condensed@2"].tolist() == [1.0]
    rg = condense(build_ranked_grades([ranking], [qrels], 6), 2)
    assert rg.rank.tolist() == [0, 1] and rg.grade.tolist() == [1.0, 0.0]
    # ideal: grades 2, 1 -> DCG of (1, 0) over DCG of (2, 1)
    ideal = 2 + 1 / np.log2(3)
    assert columns["ndcg_condensed@2"].tolist() == [pytest.approx(1 / ideal)]


def test_judged_counts_explicit_non_relevant_judgements() -> None:
    """judged@K is the share of the top K carrying any label, a 0-grade included: a label
    snapshot with imported non-relevant judgements raises it."""
    ranking = ["a", "b", "c", "d"]
    relevant_only = per_query_columns([ranking], [{"a": 1}], [4])
    with_zeros = per_query_columns([ranking], [{"a": 1, "c": 0, "d": 0}], [4])
    assert relevant_only["judged@4"].tolist() == [0.25]
    assert with_zeros["judged@4"].tolist() == [0.75]
    assert with_zeros["recall@4"].tolist() == relevant_only["recall@4"].tolist() == [1.0]
