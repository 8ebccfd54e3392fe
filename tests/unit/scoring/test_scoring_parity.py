"""Parity with trec_eval (through pytrec_eval) on thousands of random runs.

Both sides see the same run: pytrec_eval gets {docid: score} and sorts it itself; our side gets
the ranking from `trec_order` (score desc, docid desc), the order trec_eval imposes. The random
data has graded labels 0..3, heavy score ties, runs shorter than k, unjudged documents, queries
judged non-relevant only, and labelled queries absent from the run.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import pytrec_eval
from support.random_cases import random_case

from retrieval_bench.data.trec import read_run, run_rankings, trec_order, write_run
from retrieval_bench.scoring.aggregate import score_stage
from retrieval_bench.scoring.labels import judge_qrels

CUTOFFS = [1, 2, 3, 5, 10, 20]


def _ours(qrels: dict, run: dict) -> dict:
    rankings = run_rankings({q: trec_order(docs.items()) for q, docs in run.items()})
    return score_stage(rankings, judge_qrels(qrels), CUTOFFS)


def _theirs(qrels: dict, run: dict) -> dict[str, dict[str, float]]:
    cuts = ",".join(map(str, CUTOFFS))
    measures = {f"recall.{cuts}", f"P.{cuts}", f"success.{cuts}", f"ndcg_cut.{cuts}"}
    out = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    rr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"})
    for k in CUTOFFS:
        cut = {q: dict(trec_order(docs.items())[:k]) for q, docs in run.items()}
        for q, values in rr.evaluate(cut).items():
            out[q][f"recip_rank@{k}"] = values["recip_rank"]
    return out


def _compare(ours: dict, theirs: dict, qrels: dict) -> int:
    per_query = ours["per_query"]
    # We score exactly the queries trec_eval evaluates, minus those without a relevant id.
    expected = {q for q in theirs if any(g > 0 for g in qrels[q].values())}
    assert set(per_query) == expected
    names = {"recall": "recall_{}", "precision": "P_{}", "hit": "success_{}"}
    names |= {"ndcg": "ndcg_cut_{}", "mrr": "recip_rank@{}"}
    for q, row in per_query.items():
        for k in CUTOFFS:
            for ours_name, their_name in names.items():
                mine, ref = row[f"{ours_name}@{k}"], theirs[q][their_name.format(k)]
                assert mine == pytest.approx(ref, abs=1e-9), (q, ours_name, k, mine, ref)
    return len(per_query)


@pytest.mark.parametrize(("seed", "scorable"), [(0, 826), (1, 808), (2, 816), (3, 830)])
def test_parity_with_pytrec_eval(seed: int, scorable: int) -> None:
    qrels, run = random_case(seed, 1000)
    scored = _compare(_ours(qrels, run), _theirs(qrels, run), qrels)
    # the comparison covered every query with a relevant label and a ranking
    assert scored == scorable


def test_parity_through_trec_files(tmp_path: Path) -> None:
    """A run written and read back scores the same as trec_eval on the in-memory run."""
    qrels, run = random_case(99, 500)
    path = tmp_path / "stage.run"
    write_run(path, run, tag="parity")
    ours = score_stage(run_rankings(read_run(path)), judge_qrels(qrels), CUTOFFS)
    _compare(ours, _theirs(qrels, run), qrels)


def test_overall_means_match_pytrec_eval_means() -> None:
    qrels, run = random_case(5, 800)
    ours = _ours(qrels, run)["overall"]
    theirs = _theirs(qrels, run)
    scored = [q for q in theirs if any(g > 0 for g in qrels[q].values())]
    for k in CUTOFFS:
        for ours_name, their_name in (("recall", "recall_{}"), ("ndcg", "ndcg_cut_{}")):
            ref = float(np.mean([theirs[q][their_name.format(k)] for q in scored]))
            assert ours[f"{ours_name}@{k}"] == pytest.approx(ref, abs=1e-9)
