"""End to end: the Hydra app on the small fixture, its files, figures and errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURE, SHARED_BENCHMARKS, mini_overrides, run_app

from retrieval_bench.data.evalset import load_evalset
from retrieval_bench.data.trec import read_run
from retrieval_bench.scoring.aggregate import score_stage
from retrieval_bench.scoring.labels import judge

CONTRACT_FILES = ["rankings.jsonl", "qrels.trec", "metrics.json", "manifest.json", "report.md"]


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    tmp = tmp_path_factory.mktemp("job")
    proc = run_app([*mini_overrides(tmp), f"hydra.run.dir={tmp / 'run1'}"])
    assert proc.returncode == 0, proc.stderr
    return tmp, proc.stdout


def test_job_writes_every_contract_file(job: tuple[Path, str]) -> None:
    tmp, _ = job
    run_dir = tmp / "run1"
    for name in CONTRACT_FILES:
        assert (run_dir / name).is_file(), name
    assert sorted(p.name for p in (run_dir / "trec").iterdir()) == [
        "bm25.run",
        "dense.run",
        "final.run",
        "fused.run",
    ]
    records = [json.loads(line) for line in (run_dir / "rankings.jsonl").read_text().splitlines()]
    assert len(records) == 9
    first = records[0]
    assert set(first["stages"]) == {"bm25", "dense", "fused", "final"}
    assert first["stages"]["bm25"]["pool_requested"] == 10
    assert first["stages"]["final"]["pool_returned"] <= 6
    for record in records:
        for stage in record["stages"].values():
            assert len(stage["ids"]) == len(set(stage["ids"])) == stage["pool_returned"]
            assert stage["scores"] == sorted(stage["scores"], reverse=True)


def test_metrics_follow_the_contract_and_count_exclusions(job: tuple[Path, str]) -> None:
    tmp, stdout = job
    metrics = json.loads((tmp / "run1" / "metrics.json").read_text())
    final = metrics["stages"]["final"]
    for name in (
        "recall@6",
        "recall_pooled@6",
        "recall_bound@6",
        "hit@6",
        "all_hit@6",
        "mrr@6",
        "ndcg@6",
    ):
        assert 0.0 <= final["overall"][name] <= 1.0, name
    assert final["counts"]["scored"] == 6
    assert final["counts"]["excluded"] == {
        "unreviewed": 1,
        "no_answer": 1,
        "gold_missing_from_corpus": 1,
    }
    assert set(final["by_type"]) >= {"entity_exact", "negation", "multi_hop"}
    # The terminal shows the per-type table for the final stage.
    assert "entity_exact" in stdout and "recall@6" in stdout and "excluded" in stdout


def test_final_run_rescored_from_trec_file_matches_metrics(job: tuple[Path, str]) -> None:
    tmp, _ = job
    run_dir = tmp / "run1"
    metrics = json.loads((run_dir / "metrics.json").read_text())
    run = read_run(run_dir / "trec" / "final.run")
    queries = load_evalset(FIXTURE / "evalsets" / "mini.jsonl")
    passages = [
        json.loads(line)["id"]
        for line in (FIXTURE / "corpus" / "mini" / "passages.jsonl").read_text().splitlines()
    ]
    rescored = score_stage(
        {q: [d for d, _ in docs] for q, docs in run.items()}, judge(queries, set(passages)), [6]
    )
    recorded = metrics["stages"]["final"]["overall"]
    assert rescored["overall"] == pytest.approx({m: recorded[m] for m in rescored["overall"]})


def test_second_run_is_byte_identical_and_encodes_nothing(job: tuple[Path, str]) -> None:
    tmp, _ = job
    proc = run_app([*mini_overrides(tmp), f"hydra.run.dir={tmp / 'run2'}"])
    assert proc.returncode == 0, proc.stderr
    for name in [
        "rankings.jsonl",
        "qrels.trec",
        *(f"trec/{s}.run" for s in ("bm25", "dense", "fused", "final")),
    ]:
        assert (tmp / "run1" / name).read_bytes() == (tmp / "run2" / name).read_bytes(), name
    first = json.loads((tmp / "run1" / "manifest.json").read_text())
    second = json.loads((tmp / "run2" / "manifest.json").read_text())
    assert first["embeddings"]["passages"] == {"encoded": 12, "cached": 0}
    assert second["embeddings"]["passages"] == {"encoded": 0, "cached": 12}
    assert second["dataset"]["files_sha256"] == first["dataset"]["files_sha256"]
    assert set(second["timings_s"]) >= {"load", "retrieve", "score"}


def test_multirun_makes_one_folder_per_retriever(job: tuple[Path, str]) -> None:
    tmp, _ = job
    sweep = tmp / "sweep"
    proc = run_app(
        ["-m", "retriever=bm25,dense,hybrid", *mini_overrides(tmp), f"hydra.sweep.dir={sweep}"]
    )
    assert proc.returncode == 0, proc.stderr
    jobs = sorted(p for p in sweep.iterdir() if (p / "metrics.json").is_file())
    assert len(jobs) == 3
    names = sorted(sorted(json.loads((p / "metrics.json").read_text())["stages"]) for p in jobs)
    assert names == [["bm25", "dense", "final", "fused"], ["bm25", "final"], ["dense", "final"]]


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("retriever=hybird", "Available options in 'retriever'"),
        ("top_k=0", "top_k"),
        ("retriever.pool_size=-1", "retriever.pool_size"),
        ("not_a_key=1", "not_a_key"),
        ("top_k=many", "top_k"),
        ("encoder.kind=nope", "encoder.kind"),
    ],
)
def test_bad_config_names_the_key(tmp_path: Path, override: str, expected: str) -> None:
    proc = run_app([*mini_overrides(tmp_path), override, f"hydra.run.dir={tmp_path / 'run'}"])
    assert proc.returncode != 0
    assert expected in proc.stderr + proc.stdout
    assert not (tmp_path / "run" / "metrics.json").exists()


def test_malformed_line_names_file_and_line(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(FIXTURE / "corpus" / "mini", corpus)
    lines = (corpus / "passages.jsonl").read_text().splitlines()
    lines[3] = lines[3][:-5]
    (corpus / "passages.jsonl").write_text("\n".join(lines) + "\n")
    proc = run_app(
        [*mini_overrides(tmp_path), f"dataset.corpus={corpus}", f"hydra.run.dir={tmp_path / 'run'}"]
    )
    assert proc.returncode == 2
    assert f"{corpus / 'passages.jsonl'}:4: malformed JSON" in proc.stderr
    assert not (tmp_path / "run" / "metrics.json").exists()


def test_beir_folder_runs_through_the_app(tmp_path: Path) -> None:
    from test_data import make_beir

    root = make_beir(tmp_path / "toy")
    proc = run_app(
        [
            "dataset=beir",
            f"dataset.path={root}",
            "retriever=bm25",
            "top_k=3",  # the toy corpus holds 3 passages
            f"cache_dir={tmp_path / 'cache'}",
            f"hydra.run.dir={tmp_path / 'run'}",
        ]
    )
    assert proc.returncode == 0, proc.stderr
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["dataset"]["name"] == "toy"
    assert metrics["stages"]["final"]["counts"]["scored"] == 2
    assert set(metrics["stages"]["final"]["by_type"]) == {"support", "unknown"}


@pytest.mark.skipif(not (SHARED_BENCHMARKS / "cmrc2018").is_dir(), reason="../shared absent")
def test_shared_cmrc2018_bm25(tmp_path: Path) -> None:
    proc = run_app(
        [
            "dataset=beir",
            f"dataset.path={SHARED_BENCHMARKS / 'cmrc2018'}",
            "retriever=bm25",
            "top_k=10",
            f"cache_dir={tmp_path / 'cache'}",
            f"hydra.run.dir={tmp_path / 'run'}",
        ]
    )
    assert proc.returncode == 0, proc.stderr
    overall = json.loads((tmp_path / "run" / "metrics.json").read_text())["stages"]["final"][
        "overall"
    ]
    assert overall["n"] == 1000
    # Questions were written while reading the paragraph: lexical retrieval is near-saturated.
    assert overall["hit@10"] > 0.8
