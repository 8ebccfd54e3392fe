"""The stages after fusion in a whole job: rerank (a tiny random cross-encoder built here) and
context recorded, exported, scored and reported; the where-was-it-lost table; refusal on the
reranker's score; and the bad settings refused at start with exit 2, naming the key."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import mini_overrides, run_in_process
from support.random_models import build_random_cross_encoder

import run.__main__ as app
from retrieval_bench.data.trec import read_run
from retrieval_bench.errors import ConfigError
from retrieval_bench.records import passage_text

BUDGET = 120


@pytest.fixture(scope="module")
def tiny_reranker(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("reranker")
    build_random_cross_encoder(target)
    return target


@pytest.fixture(scope="module")
def job(
    tmp_path_factory: pytest.TempPathFactory, tiny_reranker: Path, shared_cache: Path
) -> tuple[Any, Path]:
    tmp = tmp_path_factory.mktemp("stages-job")
    overrides = [
        *mini_overrides(tmp),
        f"cache_dir={shared_cache}",
        "reranker=cross_encoder",
        f"stages.rerank.model={tiny_reranker}",
        "stages.rerank.depth=8",
        "retriever.pool_size=8",
        "top_k=4",
        f"stages.context.budget_chars={BUDGET}",
        "stages.context.max_per_doc=1",
    ]
    return run_in_process(overrides, tmp)


@pytest.mark.slow  # the job loads a (tiny) cross-encoder: torch and FlagEmbedding
def test_every_stage_is_recorded_in_pipeline_order(job: tuple[Any, Path]) -> None:
    result, _ = job
    assert list(result.metrics["stages"]) == [
        "bm25",
        "dense",
        "fused",
        "rerank",
        "final",
        "context",
    ]
    passages = {p.id: p for p in result.dataset.passages}
    for record in result.records:
        stages = record.stages
        # rerank: the fused ranking's top 8, re-ordered; final: its top 4.
        assert sorted(stages["rerank"].ids) == sorted(stages["fused"].ids[:8])
        assert stages["final"].ids == stages["rerank"].ids[:4]
        assert stages["final"].scores == stages["rerank"].scores[:4]
        # context: a subsequence of final within the budget, one passage per document.
        context = stages["context"].ids
        assert [pid for pid in stages["final"].ids if pid in context] == context
        assert sum(len(passage_text(passages[pid])) for pid in context) <= BUDGET
        documents = [passages[pid].doc_id or pid for pid in context]
        assert len(set(documents)) == len(documents)


@pytest.mark.slow  # the job loads a (tiny) cross-encoder: torch and FlagEmbedding
def test_rerank_and_context_are_exported_as_trec_runs(job: tuple[Any, Path]) -> None:
    result, job_dir = job
    for stage in ("rerank", "context"):
        run = read_run(job_dir / "trec" / f"{stage}.run")
        expected = {
            r.query.query_id: dict(zip(r.stages[stage].ids, r.stages[stage].scores, strict=True))
            for r in result.records
            if r.stages[stage].ids
        }
        assert {qid: dict(docs) for qid, docs in run.items()} == expected


@pytest.mark.slow  # the job loads a (tiny) cross-encoder: torch and FlagEmbedding
def test_refusal_thresholds_the_rerankers_score(job: tuple[Any, Path]) -> None:
    result, _ = job
    refusal = result.metrics["refusal"]
    assert refusal["stage"] == "rerank"
    tops = {r.query.query_id: r.stages["rerank"].scores[0] for r in result.records}
    for qid, row in refusal["per_query"].items():
        assert row["top_score"] == tops[qid]


@pytest.mark.slow  # the job loads a (tiny) cross-encoder: torch and FlagEmbedding
def test_lost_at_table_in_metrics_and_report(job: tuple[Any, Path]) -> None:
    result, job_dir = job
    loss = result.metrics["stage_loss"]
    assert loss["checkpoints"] == ["pool", "fused", "rerank", "final", "context"]
    overall = loss["overall"]
    scored = result.judgements.qrels
    assert overall["queries"] == len(scored)
    assert overall["labelled"] == sum(
        1 for labels in scored.values() for grade in labels.values() if grade > 0
    )
    assert sum(overall["lost_at"].values()) == overall["labelled"]
    # Traceable: the per-query lists add up to the counts.
    for stage in loss["checkpoints"]:
        listed = sum(len(lost.get(stage, [])) for lost in loss["per_query"].values())
        assert listed == overall["lost_at"][stage]
    # `kept` = in the context.
    kept = sum(
        1
        for r in result.records
        if r.query.query_id in scored
        for pid, grade in scored[r.query.query_id].items()
        if grade > 0 and pid in r.stages["context"].ids
    )
    assert overall["lost_at"]["kept"] == kept
    report = (job_dir / "report.md").read_text(encoding="utf-8")
    counts = [overall["lost_at"][c] for c in [*loss["checkpoints"], "kept"]]
    row = " | ".join(str(v) for v in ["all", overall["queries"], overall["labelled"], *counts])
    assert "## Where labelled passages were lost" in report
    assert f"| {row} |" in report


@pytest.mark.slow  # the job loads a (tiny) cross-encoder: torch and FlagEmbedding
def test_manifest_records_each_later_stage(job: tuple[Any, Path], tiny_reranker: Path) -> None:
    _, job_dir = job
    stages = json.loads((job_dir / "manifest.json").read_text())["stages"]
    assert stages["rerank"]["model"] == tiny_reranker.name
    assert stages["rerank"]["depth"] == 8
    assert stages["context"]["budget_chars"] == BUDGET
    assert stages["context"]["max_per_doc"] == 1


def test_a_stage_no_query_recorded_is_refused_for_refusal(tmp_path: Path) -> None:
    overrides = [*mini_overrides(tmp_path), "retriever=bm25", "refusal.score_stage=rerank"]
    with pytest.raises(ConfigError) as refused:
        run_in_process(overrides, tmp_path)
    assert refused.value.key == "refusal.score_stage"
    assert "'rerank' is not a stage this job records" in str(refused.value)
    assert not any((tmp_path / "cache").rglob("*.npz"))  # before BM25 tokenised anything


@pytest.mark.usefixtures("app_logging")  # the app configures logging before it refuses
@pytest.mark.parametrize(
    ("overrides", "says"),
    [
        (
            ["reranker=cross_encoder", "stages.rerank.model=m", "stages.rerank.depth=20"],
            "config key 'stages.rerank.depth': 20 is larger than retriever.pool_size=10",
        ),
        (
            ["stages.context.budget_chars=20"],
            "config key 'stages.context.budget_chars': 20 characters is smaller than the corpus's "
            "shortest passage",
        ),
        (
            ["reranker=cross_encoder", "stages.rerank.model=/nowhere/bge-reranker-v2-m3"],
            "stages.rerank model '/nowhere/bge-reranker-v2-m3' cannot be loaded: no directory at "
            "/nowhere/bge-reranker-v2-m3. Set stages.rerank.model=/local/path/to/"
            "bge-reranker-v2-m3 to a downloaded copy of the model, or run without a rerank "
            "stage: leave stages.rerank.model empty (reranker=none).",
        ),
    ],
)
def test_bad_stage_settings_exit_2_at_start(
    overrides: list[str],
    says: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = [*mini_overrides(tmp_path), f"hydra.run.dir={tmp_path / 'job'}", *overrides]
    monkeypatch.setattr(sys, "argv", ["run", *argv])
    assert app.main() == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and says in err and "Traceback" not in err
    # Refused before any arm was built: nothing was tokenised or encoded.
    assert not any((tmp_path / "cache").rglob("*.npy"))
    assert not any((tmp_path / "cache").rglob("*.npz"))
    assert "HYDRA_FULL_ERROR" not in os.environ
