"""A finished job logged to MLflow (its sqlite store, in process): the run's metrics equal the
job's metrics.json, its params and tags say what produced them, its artifacts are the job's
files; logging again finds the run by the folder's key and duplicates nothing; a half-logged
run is completed by the next sync; a folder that is not a finished job is refused naming it.
MLflow is imported inside the tests (collection stays light)."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from retrieval_bench.config.tracking import TrackingConfig
from retrieval_bench.jobdir.names import UNFINISHED
from retrieval_bench.tracking import names as tn
from retrieval_bench.tracking.content import comparison_figures, job_artifacts, job_metrics
from retrieval_bench.tracking.folders import NotTrackable
from retrieval_bench.tracking.names import metric_name
from retrieval_bench.tracking.sync import sync_folders


def _cfg(tmp_path: Path) -> TrackingConfig:
    return TrackingConfig(kind="mlflow", uri=f"sqlite:///{tmp_path / 'mlflow.db'}")


def _runs(cfg: TrackingConfig) -> list[Any]:
    from retrieval_bench.tracking.store import TrackingStore

    store = TrackingStore.open(cfg)
    return [run for exp_id in store.experiment_ids() for run in store.runs(exp_id)]


def test_metric_names_are_ones_mlflow_accepts() -> None:
    assert metric_name("final", "ndcg@6", "negation") == "final/ndcg_at_6/negation"
    assert metric_name("final", "recall@6", "否定 (neg)") == "final/recall_at_6/否定 _neg_"
    assert metric_name("verdict", "recall@K", "all", "retriever=bm25") == (
        "verdict/recall_at_K/all/retriever_bm25"
    )
    assert metric_name("x", "..", "a/b") == "x/_.._/a_b"


def test_every_number_of_metrics_json_becomes_one_metric(mini_job: Any) -> None:
    _, folder = mini_job
    metrics = json.loads((folder / "metrics.json").read_text())
    logged = job_metrics(metrics)
    expected = 0
    for stage, record in metrics["stages"].items():
        for group, values in {**record["by_type"], "all": record["overall"]}.items():
            for name, value in values.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    expected += 1
                    assert logged[metric_name(stage, name, group)] == value
                else:  # undefined (null) is left out, never logged as 0
                    assert metric_name(stage, name, group) not in logged
    assert len(logged) == expected > 0


def test_a_job_is_one_run_holding_its_metrics_params_tags_and_files(
    mini_job: Any, tmp_path: Path
) -> None:
    _, folder = mini_job
    cfg = _cfg(tmp_path)
    synced = sync_folders([folder], cfg)
    [run] = _runs(cfg)
    assert synced.lines == [f"job {folder}: run {run.info.run_id} (created)"]
    metrics = json.loads((folder / "metrics.json").read_text())
    assert run.data.metrics == job_metrics(metrics)
    manifest = json.loads((folder / "manifest.json").read_text())
    params, tags = run.data.params, run.data.tags
    assert (params["dataset"], params["retriever"], params["top_k"]) == ("mini", "hybrid", "6")
    assert params["dataset.name"] == "mini"  # differs from the default (travel)
    assert "combiners.rrf.k" not in params  # the default's value: not a param
    assert tags[tn.LABELS_HASH] == manifest["labels"]["hash"]
    assert tags[tn.KIND] == "job" and tags[tn.COMPLETE] == "true"
    assert tags[tn.FOLDER] == str(folder.resolve())
    assert run.info.status == "FINISHED"
    for name, sha in manifest["dataset"]["files_sha256"].items():
        assert tags[metric_name(tn.FILE_HASH_PREFIX + name)] == sha

    from retrieval_bench.tracking.store import TrackingStore

    store = TrackingStore.open(cfg)
    got = store.download(run.info.run_id, "", tmp_path / "back")
    for name in ("metrics.json", "manifest.json", "report.md", "report.html", "qrels.trec"):
        assert (got / name).read_bytes() == (folder / name).read_bytes()
    with gzip.open(got / "rankings.jsonl.gz", "rb") as fh:
        assert fh.read() == (folder / "rankings.jsonl").read_bytes()
    assert sorted(p.name for p in (got / "trec").iterdir()) == sorted(
        p.name for p in (folder / "trec").iterdir()
    )


def test_syncing_again_duplicates_nothing_and_completes_a_half_logged_run(
    mini_job: Any, tmp_path: Path
) -> None:
    _, folder = mini_job
    cfg = _cfg(tmp_path)
    sync_folders([folder], cfg)
    [first] = _runs(cfg)
    again = sync_folders([folder], cfg)
    assert again.lines == [f"job {folder}: run {first.info.run_id} (unchanged)"]

    # Half-logged: a run that lost its metrics' end and its completion mark (the tracker went
    # down mid-way), as a sync finds it.
    from retrieval_bench.tracking.store import TrackingStore

    client = TrackingStore.open(cfg).client
    client.set_tag(first.info.run_id, tn.COMPLETE, "false")
    client.delete_tag(first.info.run_id, "rb.digest")
    completed = sync_folders([folder], cfg)
    assert completed.lines == [f"job {folder}: run {first.info.run_id} (updated)"]
    [run] = _runs(cfg)
    assert run.info.run_id == first.info.run_id
    assert run.data.tags[tn.COMPLETE] == "true"
    assert run.data.metrics == first.data.metrics
    # Each metric logged once: completing re-sends none that were already there.
    name = metric_name("final", "ndcg@6", "all")
    assert len(client.get_metric_history(run.info.run_id, name)) == 1


def test_a_folder_that_is_no_finished_job_is_refused_naming_it(
    mini_job: Any, tmp_path: Path
) -> None:
    _, folder = mini_job
    unfinished = tmp_path / "job"
    shutil.copytree(folder, unfinished)
    (unfinished / UNFINISHED).write_text("failed: boom (2026-01-01T00:00:00, pid 1 on x)\n")
    with pytest.raises(NotTrackable, match=r"job: not a finished job \(unfinished: failed: boom"):
        sync_folders([unfinished], _cfg(tmp_path))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(NotTrackable, match="empty: neither a finished job folder nor a sweep"):
        sync_folders([empty], _cfg(tmp_path))
    assert not (tmp_path / "mlflow.db").exists()  # refused before the tracker was opened


def test_a_comparison_gives_verdict_tags_and_tier_metrics() -> None:
    comparison = {
        "datasets": {
            "travel": {
                "cells": {"ndcg@K": {"negation": {"verdicts": {"retriever=bm25": "lose"}}}},
                "tiers": {"ndcg@K": {"all": {"tier_of": {"retriever=bm25": 2}}}},
            }
        }
    }
    tags, metrics = comparison_figures(comparison)
    assert tags == {"verdict/ndcg_at_K/negation/retriever_bm25": "lose"}
    assert metrics == {"tier/ndcg_at_K/all/retriever_bm25": 2.0}


def test_a_sweeps_run_is_incomplete_until_its_comparison_is_logged(
    mini_job: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The live logger opens the sweep's run as the sweep starts; until the sweep's end logs
    its comparison, the run is neither complete nor finished (a logger killed mid-sweep leaves
    a run that says so, which the next sync completes). The end does not read again the jobs
    the logger logged (what the sweep waits for)."""
    from retrieval_bench.jobdir.read import FinishedJob
    from retrieval_bench.tracking.store import TrackingStore
    from retrieval_bench.tracking.sync import Syncer

    _, job = mini_job
    sweep = tmp_path / "sweep"
    shutil.copytree(job, sweep / "0-retriever=hybrid")
    store = TrackingStore.open(_cfg(tmp_path))
    syncer = Syncer(store)
    opened = syncer.open_sweep(sweep, "mini")
    run = store.client.get_run(opened.run_id)
    assert run.data.tags[tn.COMPLETE] == "false"
    assert run.info.status == "RUNNING"
    assert syncer.open_sweep(sweep, "mini").run_id == opened.run_id  # found again, not doubled

    syncer.job(sweep / "0-retriever=hybrid", opened.run_id, "0-retriever=hybrid")
    handed = {key for key, logged in syncer.synced.runs.items() if logged.run_id != opened.run_id}
    loaded: list[Path] = []
    load = FinishedJob.load

    def counted(cls: type, path: Path, *args: Any, **kw: Any) -> Any:
        loaded.append(path)
        return load(path, *args, **kw)

    monkeypatch.setattr(FinishedJob, "load", classmethod(counted))
    syncer.sweep(sweep, skip=handed, dataset="mini")
    assert loaded == []
    run = store.client.get_run(opened.run_id)
    assert run.data.tags[tn.COMPLETE] == "true"
    assert run.info.status == "FINISHED"
    [child] = [r for r in _runs(_cfg(tmp_path)) if r.data.tags[tn.KIND] == "job"]
    assert child.data.tags[tn.PARENT_RUN_ID] == opened.run_id


def test_a_run_is_marked_complete_in_one_request_after_its_values_and_files(
    mini_job: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a run logs goes in as few requests as MLflow allows (a sweep waits for its last
    job's): its values in one batch, its files (straight into the artifact store the created
    run names: the run is not asked for again), then its digest and completion mark together,
    last."""
    from mlflow.store.artifact.local_artifact_repo import LocalArtifactRepository
    from mlflow.tracking import MlflowClient

    calls: list[tuple[str, Any]] = []
    for owner, name in (
        (MlflowClient, "log_batch"),
        (LocalArtifactRepository, "log_artifact"),
        (MlflowClient, "get_run"),
        (MlflowClient, "set_tag"),
        (MlflowClient, "set_terminated"),
    ):
        method = getattr(owner, name)

        def spied(*args: Any, _method: Any = method, _name: str = name, **kw: Any) -> Any:
            tags = kw.get("tags") or (args[4] if _name == "log_batch" and len(args) > 4 else [])
            calls.append((_name, sorted(t.key for t in tags or [])))
            return _method(*args, **kw)

        monkeypatch.setattr(owner, name, spied)
    _, folder = mini_job
    sync_folders([folder], _cfg(tmp_path))
    names = [name for name, _ in calls]
    assert "set_tag" not in names and "get_run" not in names
    assert names.count("log_batch") == 2
    assert names[-2:] == ["log_batch", "set_terminated"]
    assert calls[-2][1] == sorted([tn.COMPLETE, tn.DIGEST])
    assert names.count("log_artifact") == len(job_artifacts(folder)) > 5


def _count_searches(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    from mlflow.tracking import MlflowClient

    searched: list[str] = []
    search = MlflowClient.search_runs

    def counted(self: Any, *args: Any, **kw: Any) -> Any:
        searched.append(str(kw.get("filter_string", "")))
        return search(self, *args, **kw)

    monkeypatch.setattr(MlflowClient, "search_runs", counted)
    return searched


def test_a_new_sweep_folders_handed_jobs_are_logged_without_a_search_each(
    mini_job: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sweep folder that held no job when its run was created can have no job run logged
    before (a run's key is its folder): the jobs handed to its logger are created without
    looking, and its end logs onto the run it opened. A job another process ran (and logged
    itself) is searched for at the end and not doubled; nor is anything by a second sync, or
    by a sweep opened again (its run found, not created: its jobs are searched for)."""
    from retrieval_bench.tracking.store import TrackingStore
    from retrieval_bench.tracking.sync import Syncer

    _, job = mini_job
    sweep = tmp_path / "sweep"
    handed, elsewhere = sweep / "0-retriever=hybrid", sweep / "1-retriever=hybrid"
    shutil.copytree(job, handed)
    shutil.copytree(job, elsewhere)
    store = TrackingStore.open(_cfg(tmp_path))
    searched = _count_searches(monkeypatch)
    syncer = Syncer(store)
    opened = syncer.open_sweep(sweep, "mini", new_folder=True)
    assert opened.created and len(searched) == 1  # the sweep's own key
    Syncer(store).job(elsewhere, opened.run_id, elsewhere.name)  # its own process's logger
    assert len(searched) == 2
    assert syncer.job(handed, opened.run_id, handed.name, handed=True).created
    assert len(searched) == 2
    syncer.sweep(sweep, skip={str(handed.resolve())}, dataset="mini")
    assert len(searched) == 3  # the job it was not handed: found, not doubled
    parent = store.client.get_run(opened.run_id)
    assert parent.data.tags[tn.COMPLETE] == "true" and parent.info.status == "FINISHED"
    runs = _runs(_cfg(tmp_path))
    assert sorted(r.data.tags[tn.KIND] for r in runs) == ["job", "job", "sweep"]
    assert {r.data.tags.get(tn.PARENT_RUN_ID) for r in runs} == {None, opened.run_id}

    again = sync_folders([sweep], _cfg(tmp_path))
    assert [line.rsplit("(", 1)[1] for line in again.lines] == ["unchanged)"] * 3
    reopened = Syncer(store)
    assert not reopened.open_sweep(sweep, "mini", new_folder=True).created
    reopened.job(handed, opened.run_id, handed.name, handed=True)
    assert len(_runs(_cfg(tmp_path))) == 3


def test_a_run_complete_but_not_ended_is_ended_by_the_next_sync(
    mini_job: Any, tmp_path: Path
) -> None:
    """The completion mark and the run's end go side by side to a server; should only the mark
    arrive, the next sync ends the run and sends nothing else."""
    from retrieval_bench.tracking.store import TrackingStore

    _, folder = mini_job
    sync_folders([folder], _cfg(tmp_path))
    [run] = _runs(_cfg(tmp_path))
    store = TrackingStore.open(_cfg(tmp_path))
    store.client.update_run(run.info.run_id, status="RUNNING")
    again = sync_folders([folder], _cfg(tmp_path))
    assert again.lines[0].endswith("(unchanged)")
    ended = store.client.get_run(run.info.run_id)
    assert ended.info.status == "FINISHED"
    assert ended.data.metrics == run.data.metrics


def test_a_runs_artifact_store_is_opened_as_mlflows_client_opens_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Files go to the store the run names without asking the tracker for the run again, and
    with what MLflow's own `log_artifact` adds to that URI: a Databricks profile."""
    from mlflow.store.artifact import artifact_repository_registry as registry

    from retrieval_bench.tracking.store import artifact_repository

    opened: list[tuple[str, str | None]] = []
    monkeypatch.setattr(
        registry,
        "get_artifact_repository",
        lambda uri, tracking_uri=None: opened.append((uri, tracking_uri)),
    )
    artifact_repository("dbfs:/databricks/mlflow/1/abc/artifacts", "databricks://team")
    artifact_repository("mlflow-artifacts:/1/abc/artifacts", "http://127.0.0.1:5000")
    assert opened == [
        ("dbfs://team@databricks/databricks/mlflow/1/abc/artifacts", "databricks://team"),
        ("mlflow-artifacts:/1/abc/artifacts", "http://127.0.0.1:5000"),
    ]
