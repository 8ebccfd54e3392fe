"""Empty rankings say why: BM25's empty pools carry their reason (no query terms, no matching
terms, filtered out), a job counts them per stage and names them in rankings.jsonl and
report.md, and a fused stage is empty only when every arm is."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURE, mini_overrides, run_in_process

from retrieval_bench.config.bm25 import BM25_IMPLS, BM25Config
from retrieval_bench.job.contract import StageContract
from retrieval_bench.records import EvalQuery, Ranked
from retrieval_bench.retrievers.bm25 import BM25Retriever
from retrieval_bench.tiebreak import shared_tie_break


@pytest.mark.parametrize("impl", BM25_IMPLS)
def test_bm25_empty_pools_carry_their_reason(impl: str) -> None:
    ids = ["a", "b", "c"]
    corpus = [["sun", "star"], ["cat", "mammal"], ["moon", "earth"]]
    retriever = BM25Retriever(ids, corpus, str.split, BM25Config(impl=impl))
    only_b = np.array([False, True, False])
    found, blank, unknown, filtered = retriever.search(
        ["sun", "   ", "zebra", "sun"], 3, [None, None, None, only_b]
    )
    assert found.indices.tolist() == [0] and found.empty_reason is None
    assert (blank.returned, blank.empty_reason) == (0, "no_query_terms")
    assert (unknown.returned, unknown.empty_reason) == (0, "no_matching_terms")
    assert (filtered.returned, filtered.empty_reason) == (0, "filtered_out")


@pytest.fixture(scope="module")
def empty_query_job(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """The mini set plus a query of only punctuation and one of terms the corpus lacks."""
    tmp = tmp_path_factory.mktemp("empty")
    lines = (FIXTURE / "evalsets" / "mini.jsonl").read_text(encoding="utf-8").splitlines()
    labels = {"query_type": "entity_exact", "label_status": "reviewed"}
    extra = [
        {"query_id": "p01", "query": "？！……", **labels, "relevant_ids": ["sy-wzz-tickets"]},
        {"query_id": "p02", "query": "zzqx", **labels, "relevant_ids": ["sy-wzz-tickets"]},
    ]
    evalset = tmp / "mini.jsonl"
    evalset.write_text(
        "\n".join([*lines, *(json.dumps(q, ensure_ascii=False) for q in extra)]) + "\n",
        encoding="utf-8",
    )
    overrides = [*mini_overrides(tmp), f"dataset.evalset={evalset}", "retriever=bm25"]
    _, job_dir = run_in_process(overrides, tmp)
    return job_dir, json.loads((job_dir / "metrics.json").read_text())


def test_empty_rankings_are_counted_per_stage_with_their_reason(empty_query_job) -> None:
    _, metrics = empty_query_job
    for stage in ("bm25", "final"):
        counts = metrics["stages"][stage]["counts"]
        # p02, and the fixture's m07 and m08 (no_answer, unreviewed: ranked, not scored).
        assert counts["empty_rankings"] == {"no_matching_terms": 3, "no_query_terms": 1}
        # Still scored (0): the system was asked and returned nothing.
        assert metrics["stages"][stage]["per_query"]["p01"]["recall@6"] == 0.0


def test_empty_rankings_name_their_reason_in_rankings_and_report(empty_query_job) -> None:
    job_dir, _ = empty_query_job
    records = {r["query_id"]: r for r in map(json.loads, (job_dir / "rankings.jsonl").open())}
    assert records["p01"]["stages"]["bm25"]["empty_reason"] == "no_query_terms"
    assert records["p01"]["stages"]["final"]["empty_reason"] == "no_query_terms"
    assert records["p02"]["stages"]["final"]["empty_reason"] == "no_matching_terms"
    assert records["m07"]["stages"]["final"]["empty_reason"] == "no_matching_terms"
    assert "empty_reason" not in records["m01"]["stages"]["final"]
    assert (
        "empty rankings: no_matching_terms 3, no_query_terms 1"
        in (job_dir / "report.md").read_text()
    )


def test_a_fused_stage_is_empty_only_when_every_arm_is() -> None:
    from retrieval_bench.fusion import ReciprocalRankFusion
    from retrieval_bench.job.pipeline import Pipeline
    from retrieval_bench.job.timing import PluginTiming
    from retrieval_bench.routing.rules import Strategy

    empty = Ranked(np.empty(0, np.int64), np.empty(0), 10, "no_query_terms")
    other = Ranked(np.array([1]), np.array([0.5]), 10)
    pipeline = Pipeline.__new__(Pipeline)
    pipeline.combiners = {"rrf": ReciprocalRankFusion(60)}
    pipeline.tie_break = shared_tie_break(["a", "b"])
    hybrid = Strategy("hybrid", ("bm25", "dense"))
    pipeline.contract = StageContract(["a", "b"], pipeline.tie_break)
    pipeline.timing = PluginTiming()
    query = EvalQuery("q", "query", "t", "reviewed")
    assert pipeline._combine(query, hybrid, [empty, other], None).indices.tolist() == [1]
    both = pipeline._combine(
        query, hybrid, [empty, replace(empty, empty_reason="filtered_out")], None
    )
    assert (both.returned, both.empty_reason) == (0, "no_query_terms+filtered_out")
