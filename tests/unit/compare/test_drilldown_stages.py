"""Bad cases of a job with stages after the pools (rerank, context): the cell names the arms'
pool ranks as arms and the stages after them as stages (`split_pool`, the rule `stage_loss`
uses), never a reranker or the context as an arm."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import mini_overrides, run_in_process
from support.random_models import build_random_cross_encoder

from retrieval_bench.compare.drilldown import _cell, drilldown, to_markdown
from retrieval_bench.jobdir.read import FinishedJob


def test_cell_shows_arms_in_brackets_and_later_stages_only_where_final_lacks_it() -> None:
    two_arms = {"bm25": 3, "dense": None, "fused": 7, "rerank": 9, "final": None, "context": None}
    assert _cell(two_arms, "final") == "– (bm25 3, dense –; fused 7, rerank 9)"
    # Found in final: its rank and the arms'; the stages after the pools say nothing more.
    found = {"bm25": 1, "dense": 2, "fused": 1, "rerank": 2, "final": 2, "context": 1}
    assert _cell(found, "final") == "2 (bm25 1, dense 2)"
    # One arm (no fused): the first stage is the pool; rerank is a stage, not a second arm.
    one_arm = {"bm25": 5, "rerank": 6, "final": None, "context": None}
    assert _cell(one_arm, "final") == "– (bm25 5; rerank 6)"
    assert _cell({"bm25": 1, "rerank": 1, "final": 1, "context": None}, "final") == "1"
    assert _cell({"bm25": None, "rerank": None, "final": None}, "final") == "–"
    # Compared on the context: final and rerank are the stages before it.
    assert _cell(one_arm, "context") == "– (bm25 5; rerank 6)"
    assert _cell(None, "final") == "n/a"


@pytest.fixture(scope="module")
def staged_job(tmp_path_factory: pytest.TempPathFactory, shared_cache: Path) -> Path:
    tmp = tmp_path_factory.mktemp("drilldown-stages")
    reranker = tmp / "reranker"
    build_random_cross_encoder(reranker)
    overrides = [
        *mini_overrides(tmp),
        f"cache_dir={shared_cache}",
        "retriever=bm25",
        "reranker=cross_encoder",
        f"stages.rerank.model={reranker}",
        "stages.rerank.depth=8",
        "retriever.pool_size=8",
        "top_k=2",
        "stages.context.budget_chars=120",
    ]
    return run_in_process(overrides, tmp)[1]


@pytest.mark.slow
def test_badcases_of_a_job_with_rerank_and_context(staged_job: Path) -> None:
    job = FinishedJob.load(staged_job)
    report = drilldown([job], "final", "recall@K")
    items: list[dict[str, Any]] = [i for q in report["queries"] for i in q["expected"]]
    passages = [i for i in items if i["kind"] == "passage"]
    assert passages, "the tiny job must leave some labelled passage out of its top 2"
    label = job.label
    lost_by_rerank = 0
    for item in passages:
        ranks = item["ranks"][label]
        assert list(ranks) == ["bm25", "rerank", "final", "context"]
        cell = _cell(ranks, "final")
        if ranks["final"] is not None:
            assert cell == str(ranks["final"])  # one arm, found: nothing to add
        elif ranks["rerank"] is not None:
            lost_by_rerank += 1
            assert cell == f"– (bm25 {ranks['bm25']}; rerank {ranks['rerank']})"
        elif ranks["bm25"] is not None:
            assert cell == f"– (bm25 {ranks['bm25']})"  # below the reranker's depth
        else:
            assert cell == "–"
    assert lost_by_rerank > 0  # the case the later-stage part exists for
    rows = [
        line
        for line in to_markdown(report, "mini").splitlines()
        if line.startswith("| ") and not line.startswith("| expected")
    ]
    assert len(rows) == len(items)
    assert any("rerank" in row for row in rows)
    assert not any("context" in row for row in rows)  # after final: not shown in its cells
