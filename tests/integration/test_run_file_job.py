"""The run_file arm in a job: a job's own export fed back scores exactly as the job did, it
fuses with BM25, and what a foreign run gets wrong reaches the manifest and the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import mini_overrides, run_app, run_in_process

from retrieval_bench.data.trec import read_run
from retrieval_bench.errors import ConfigError


@pytest.fixture(scope="module")
def bm25_job(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    tmp = tmp_path_factory.mktemp("bm25")
    _, job = run_in_process([*mini_overrides(tmp), "retriever=bm25", "top_k=3"], tmp)
    return job, json.loads((job / "metrics.json").read_text(encoding="utf-8"))


def _metrics(job: Path) -> dict:
    return json.loads((job / "metrics.json").read_text(encoding="utf-8"))


def _manifest(job: Path) -> dict:
    return json.loads((job / "manifest.json").read_text(encoding="utf-8"))


def _doc_metrics(stage: dict) -> dict:
    return {key: stage[key] for key in ("overall", "by_type", "counts", "per_query")}


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_a_jobs_export_fed_back_scores_exactly_as_the_job(
    bm25_job: tuple[Path, dict], tmp_path: Path
) -> None:
    job, bm25 = bm25_job
    overrides = [
        *mini_overrides(tmp_path),
        "retriever=run_file",
        f"arms.run_file.path={job / 'trec' / 'final.run'}",
        "top_k=3",
    ]
    _, fed = run_in_process(overrides, tmp_path)
    metrics = _metrics(fed)
    final, theirs = metrics["stages"]["final"], bm25["stages"]["final"]
    empty = theirs["counts"]["empty_rankings"]
    # BM25's empty rankings are absent from its export: here they are `not_in_run`, scored 0.
    assert final["counts"]["empty_rankings"] == (
        {"not_in_run": sum(empty.values())} if empty else {}
    )
    final["counts"]["empty_rankings"] = theirs["counts"]["empty_rankings"]
    assert _doc_metrics(final) == _doc_metrics(theirs)
    assert final["families"] == theirs["families"]
    assert read_run(fed / "trec" / "final.run") == read_run(job / "trec" / "final.run")
    info = _manifest(fed)["arms"]["run_file"]
    assert info["bad_input"] == {
        "unknown_ids": 0,
        "duplicates": 0,
        "queries_not_in_evalset": 0,
        "queries_not_in_run": sum(empty.values()),
        "queries_without_known_ids": 0,
    }


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_fusing_bm25_with_its_own_export_keeps_bm25s_top_k(
    bm25_job: tuple[Path, dict], tmp_path: Path
) -> None:
    """RRF of BM25's pool and its own top 3: those 3 are ranked first by both, so they are the
    fused top 3, in BM25's order."""
    job, _ = bm25_job
    overrides = [
        *mini_overrides(tmp_path),
        "retriever.arms=[bm25,run_file]",
        f"arms.run_file.path={job / 'trec' / 'final.run'}",
        "top_k=3",
    ]
    _, fused = run_in_process(overrides, tmp_path)
    metrics = _metrics(fused)
    assert list(metrics["stages"]) == ["bm25", "run_file", "fused", "final"]
    ours = read_run(fused / "trec" / "final.run")
    bm25 = read_run(job / "trec" / "final.run")
    assert {q: [d for d, _ in p] for q, p in ours.items()} == {
        q: [d for d, _ in p] for q, p in bm25.items()
    }
    assert "run_file" in _manifest(fused)["arms"]


def test_bad_input_is_counted_in_the_manifest_and_the_report(tmp_path: Path) -> None:
    run = tmp_path / "foreign.run"
    run.write_text(
        "m01 Q0 sy-wzz-tickets 1 3.0 x\n"
        "m01 Q0 not-a-passage 2 2.0 x\n"
        "m01 Q0 sy-wzz-tickets 3 1.0 x\n"
        "zz99 Q0 sy-wzz-tickets 1 1.0 x\n",
        encoding="utf-8",
    )
    overrides = [*mini_overrides(tmp_path), "retriever=run_file", f"arms.run_file.path={run}"]
    overrides.append("top_k=3")
    _, job = run_in_process(overrides, tmp_path)
    info = _manifest(job)["arms"]["run_file"]
    evalset_size = _manifest(job)["dataset"]["queries"]
    assert info["bad_input"] == {
        "unknown_ids": 1,
        "duplicates": 1,
        "queries_not_in_evalset": 1,
        "queries_not_in_run": evalset_size - 1,
        "queries_without_known_ids": 0,
    }
    assert info["examples"]["duplicates"] == [f"{run}:3 m01 sy-wzz-tickets"]
    report = (job / "report.md").read_text(encoding="utf-8")
    assert (
        f"- `run_file`: unknown_ids 1, duplicates 1, queries_not_in_evalset 1, "
        f"queries_not_in_run {evalset_size - 1}, queries_without_known_ids 0"
    ) in report
    empty = _metrics(job)["stages"]["final"]["counts"]["empty_rankings"]
    assert empty == {"not_in_run": evalset_size - 1}


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_two_run_files_run_and_fuse_as_two_arms(
    bm25_job: tuple[Path, dict], tmp_path: Path
) -> None:
    """`arms.run_file.path` for one arm, an `arms.<name>` node with its own `path` for the other."""
    job, _ = bm25_job
    other = tmp_path / "other.run"
    other.write_text("m01 Q0 sy-wzz-dive 1 9.0 other\n", encoding="utf-8")
    spec = "retrieval_bench.retrievers.run_file.RunFileArmSpec"
    overrides = [
        *mini_overrides(tmp_path),
        f"arms.run_file.path={job / 'trec' / 'final.run'}",
        f"+arms.other={{_target_: {spec}, path: '{other}'}}",
        "retriever.arms=[run_file,other]",
        "top_k=3",
    ]
    _, fused = run_in_process(overrides, tmp_path)
    assert list(_metrics(fused)["stages"]) == ["run_file", "other", "fused", "final"]
    arms = _manifest(fused)["arms"]
    assert (arms["run_file"]["path"], arms["other"]["path"]) == (
        str(job / "trec" / "final.run"),
        str(other),
    )
    assert arms["other"]["lines"] == 1
    assert read_run(fused / "trec" / "other.run") == {"m01": [("sy-wzz-dive", 9.0)]}
    assert "sy-wzz-dive" in [d for d, _ in read_run(fused / "trec" / "fused.run")["m01"]]


def test_a_missing_arm_path_names_its_key(tmp_path: Path) -> None:
    spec = "retrieval_bench.retrievers.run_file.RunFileArmSpec"
    overrides = [
        *mini_overrides(tmp_path),
        f"+arms.other={{_target_: {spec}, path: '{tmp_path / 'absent.run'}'}}",
        "retriever.arms=[bm25,other]",
    ]
    with pytest.raises(ConfigError, match=r"'arms\.other\.path': run file .* does not exist"):
        run_in_process(overrides, tmp_path)


@pytest.mark.slow
def test_the_app_refuses_a_malformed_or_missing_run_with_exit_2(tmp_path: Path) -> None:
    run = tmp_path / "bad.run"
    run.write_text("m01 Q0 sy-wzz-tickets 1 1.0 x\nm01 Q0 sy-wzz-dive one 1.0 x\n", "utf-8")
    args = [*mini_overrides(tmp_path), "retriever=run_file", f"arms.run_file.path={run}"]
    malformed = run_app(args)
    assert malformed.returncode == 2
    assert f"{run}:2: rank 'one' is not an integer" in malformed.stderr
    missing = run_app([*mini_overrides(tmp_path), "retriever=run_file"])
    assert missing.returncode == 2
    assert "config key 'arms.run_file.path': a run_file arm needs a TREC run" in missing.stderr
