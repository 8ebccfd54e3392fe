"""The job on the small fixture, in-process through the library (run_job + write_job): its
files, figures and errors. The same job through the app as a subprocess (multirun folders,
exit codes): tests/app/test_app.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import pytrec_eval
from conftest import (
    compose_config,
    mini_overrides,
    run_in_process,
    shared_benchmark,
)
from hydra.errors import HydraException
from omegaconf.errors import OmegaConfBaseException
from support.datasets import make_beir, malformed_corpus

from retrieval_bench.errors import BenchError, DataError
from retrieval_bench.job.result import JobResult
from retrieval_bench.reports.console import job_summary

CONTRACT_FILES = ["rankings.jsonl", "qrels.trec", "metrics.json", "manifest.json", "report.md"]
# (bm25, dense, fused, final) pool sizes returned per query on the fixture (pool_size 10, top_k 6);
# bm25 returns only passages sharing a token with the query.
POOLS_RETURNED = {
    "m01": (5, 10, 10, 6),
    "m02": (2, 10, 10, 6),
    "m03": (4, 10, 11, 6),
    "m04": (3, 3, 3, 3),  # 万宁 only: the city filter leaves 3 passages
    "m05": (7, 10, 10, 6),
    "m06": (3, 4, 4, 4),
    "m07": (0, 10, 10, 6),
    "m08": (0, 5, 5, 5),
    "m09": (1, 10, 10, 6),
}


@pytest.fixture
def job(mini_job: tuple[JobResult, Path]) -> tuple[JobResult, Path]:
    return mini_job


def test_job_writes_every_contract_file(job: tuple[JobResult, Path]) -> None:
    _, run_dir = job
    for name in CONTRACT_FILES:
        assert (run_dir / name).is_file(), name
    assert sorted(p.name for p in (run_dir / "trec").iterdir()) == [
        "bm25.run",
        "dense.run",
        "final.run",
        "fused.run",
    ]
    records = [json.loads(line) for line in (run_dir / "rankings.jsonl").read_text().splitlines()]
    assert [r["query_id"] for r in records] == [f"m0{i}" for i in range(1, 10)]
    for record in records:
        stages = record["stages"]
        assert list(stages) == ["bm25", "dense", "fused", "final"]
        assert stages["bm25"]["pool_requested"] == stages["dense"]["pool_requested"] == 10
        assert stages["final"]["pool_requested"] == 6
        returned = tuple(stages[s]["pool_returned"] for s in ("bm25", "dense", "fused", "final"))
        assert returned == POOLS_RETURNED[record["query_id"]], record["query_id"]
        assert stages["final"]["ids"] == stages["fused"]["ids"][:6]
        for stage in stages.values():
            assert len(stage["ids"]) == len(set(stage["ids"])) == stage["pool_returned"]
            assert stage["scores"] == sorted(stage["scores"], reverse=True)


def test_metrics_follow_the_contract_and_count_exclusions(job: tuple[JobResult, Path]) -> None:
    result, run_dir = job
    metrics = json.loads((run_dir / "metrics.json").read_text())
    final = metrics["stages"]["final"]
    overall = {
        name: final["overall"][name]
        for name in (
            "n",
            "recall@6",
            "recall_pooled@6",
            "recall_bound@6",
            "hit@6",
            "all_hit@6",
            "mrr@6",
            "ndcg@6",
        )
    }
    assert overall == pytest.approx(
        {
            "n": 6,
            "recall@6": 1.0,
            "recall_pooled@6": 1.0,
            "recall_bound@6": 1.0,
            "hit@6": 1.0,
            "all_hit@6": 1.0,
            "mrr@6": 5 / 6,
            "ndcg@6": 0.8769765845238192,
        },
        rel=1e-12,
    )
    assert final["by_type"]["negation"]["mrr@6"] == 0.5  # the 日月湾 trap ranks first
    assert final["by_type"]["no_answer"]["recall@6"] is None  # never scored as 0
    assert final["counts"]["scored"] == 6
    assert final["counts"]["excluded"] == {
        "unreviewed": 1,
        "no_answer": 1,
        "gold_missing_from_corpus": 1,
    }
    assert set(final["by_type"]) == {
        "constraint_dense",
        "entity_exact",
        "fuzzy_intent",
        "multi_hop",
        "negation",
        "no_answer",
    }
    # The terminal shows the per-type table for the final stage.
    table = job_summary(result, 6, run_dir)
    assert re.search(r"^negation\s+1\s+1\.000 .* 0\.500\s+0\.631$", table, re.M), table
    assert "excluded: gold_missing_from_corpus 1, no_answer 1, unreviewed 1" in table


def test_final_run_rescored_by_pytrec_eval_matches_metrics(job: tuple[JobResult, Path]) -> None:
    """trec_eval's own code (pytrec_eval) on the files the job wrote gives metrics.json."""
    _, run_dir = job
    qrels: dict[str, dict[str, int]] = {}
    for line in (run_dir / "qrels.trec").read_text().splitlines():
        qid, _, doc, grade = line.split()
        qrels.setdefault(qid, {})[doc] = int(grade)
    run: dict[str, dict[str, float]] = {}
    for line in (run_dir / "trec" / "final.run").read_text().splitlines():
        qid, _, doc, _, score, _ = line.split()
        run.setdefault(qid, {})[doc] = float(score)
    measures = {"recall.6", "success.6", "ndcg_cut.6", "recip_rank"}
    per_query = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    assert sorted(per_query) == sorted(qrels) and len(qrels) == 6

    def mean(measure: str) -> float:
        return sum(q[measure] for q in per_query.values()) / len(qrels)

    recorded = json.loads((run_dir / "metrics.json").read_text())["stages"]["final"]["overall"]
    assert recorded["recall@6"] == pytest.approx(mean("recall_6"), abs=1e-12)
    assert recorded["hit@6"] == pytest.approx(mean("success_6"), abs=1e-12)
    assert recorded["ndcg@6"] == pytest.approx(mean("ndcg_cut_6"), abs=1e-12)
    assert recorded["mrr@6"] == pytest.approx(mean("recip_rank"), abs=1e-12)  # runs hold <= 6


def test_second_run_is_byte_identical_and_encodes_nothing(
    job: tuple[JobResult, Path], tmp_path: Path
) -> None:
    _, first_dir = job
    # The same job again in a folder of its own, over the first job's cache.
    _, second_dir = run_in_process(mini_overrides(first_dir.parent), tmp_path)
    for name in [
        "rankings.jsonl",
        "qrels.trec",
        "metrics.json",
        *(f"trec/{s}.run" for s in ("bm25", "dense", "fused", "final")),
    ]:
        assert (first_dir / name).read_bytes() == (second_dir / name).read_bytes(), name
    first = json.loads((first_dir / "manifest.json").read_text())
    second = json.loads((second_dir / "manifest.json").read_text())
    assert first["embeddings"]["passages"] == {"encoded": 12, "cached": 0}
    assert second["embeddings"]["passages"] == {"encoded": 0, "cached": 12}
    assert first["embeddings"]["queries"] == {"encoded": 9, "cached": 0}
    assert second["embeddings"]["queries"] == {"encoded": 0, "cached": 9}
    assert second["dataset"]["files_sha256"] == first["dataset"]["files_sha256"]
    assert set(second["timings_s"]) >= {"load", "retrieve", "score"}


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("retriever=hybird", "Could not find 'retriever/hybird'"),
        ("top_k=0", "top_k"),
        ("retriever.pool_size=-1", "retriever.pool_size"),
        ("not_a_key=1", "not_a_key"),
        ("top_k=many", "top_k"),
        ("encoder._target_=nope.Enc", "encoder._target_"),
    ],
)
def test_bad_config_names_the_key(override: str, expected: str) -> None:
    with pytest.raises((HydraException, OmegaConfBaseException, BenchError)) as error:
        compose_config([override])
    assert expected in str(error.value)


def test_malformed_line_names_file_and_line(tmp_path: Path) -> None:
    corpus = malformed_corpus(tmp_path)
    message = re.escape(f"{corpus / 'passages.jsonl'}:4: malformed JSON")
    with pytest.raises(DataError, match=message):
        run_in_process([*mini_overrides(tmp_path), f"dataset.corpus={corpus}"], tmp_path)
    assert not (tmp_path / "run").exists()


def test_beir_folder_runs_through_the_job(tmp_path: Path) -> None:

    root = make_beir(tmp_path / "toy")
    result, run_dir = run_in_process(
        [
            "dataset=beir",
            f"dataset.path={root}",
            "retriever=bm25",
            "top_k=3",  # the toy corpus holds 3 passages
            f"cache_dir={tmp_path / 'c'}",
        ],
        tmp_path,
    )
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["dataset"]["name"] == "toy"
    final = result.metrics["stages"]["final"]
    assert final["counts"]["scored"] == 2
    assert set(final["by_type"]) == {"support", "unknown"}


@pytest.mark.slow  # a whole job on the real 1,000-query set (skipped where it is absent)
def test_shared_cmrc2018_bm25(tmp_path: Path) -> None:
    root = shared_benchmark("cmrc2018")
    result, _ = run_in_process(
        [
            "dataset=beir",
            f"dataset.path={root}",
            "retriever=bm25",
            "top_k=10",
            f"cache_dir={tmp_path / 'cache'}",
        ],
        tmp_path,
    )
    overall = result.metrics["stages"]["final"]["overall"]
    assert overall["n"] == 1000
    # Questions were written while reading the paragraph: lexical retrieval is near-saturated.
    assert overall["hit@10"] == pytest.approx(0.994, rel=1e-12)
    assert overall["recall@10"] == pytest.approx(0.994, rel=1e-12)
    assert overall["mrr@10"] == pytest.approx(0.9720273809523812, rel=1e-12)
    assert overall["ndcg@10"] == pytest.approx(0.9775048865298723, rel=1e-12)
