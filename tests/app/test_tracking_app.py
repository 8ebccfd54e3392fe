"""tracking=mlflow end to end against a real `mlflow server` (the `mlflow_server` fixture): a
sweep is one parent run and its jobs as children whose metrics equal each job's metrics.json,
under the basic and the joblib launcher; the server killed mid-sweep loses nothing and
`run.track sync` completes the runs without duplicates; an unreachable URI and a refused
experiment exit 2 naming the key; a single job logs itself."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, mini_overrides, run_app
from support.slurm import slurm, submitted

from retrieval_bench.config.tracking import TrackingConfig
from retrieval_bench.jobdir.read import find_job_dirs
from retrieval_bench.tracking import names as tn
from retrieval_bench.tracking.content import comparison_figures, job_artifacts, job_metrics
from run.tracking import log_finished

pytestmark = pytest.mark.slow
__all__ = ["slurm"]  # the cluster fixture (support.slurm), for the SLURM test below


def _runs(uri: str, experiment: str) -> list[Any]:
    from retrieval_bench.tracking.store import TrackingStore

    store = TrackingStore.open(TrackingConfig(kind="mlflow", uri=uri))
    found = store.client.get_experiment_by_name(experiment)
    return [] if found is None else store.runs(found.experiment_id)


def _sweep(tmp: Path, cache: Path, uri: str, experiment: str, *extra: str) -> Any:
    return run_app(
        [
            "-m",
            "retriever=bm25,dense,hybrid",
            *mini_overrides(tmp)[:-1],
            f"cache_dir={cache}",
            f"hydra.sweep.dir={tmp / 'sweep'}",
            "tracking=mlflow",
            f"tracking.uri={uri}",
            f"tracking.experiment={experiment}",
            "compare.min_queries=1",  # the mini set's few queries still get verdicts
            *extra,
        ]
    )


def _check_sweep(uri: str, experiment: str, sweep: Path) -> None:
    """One parent run holding the comparison, and one child per job whose metrics are exactly
    its metrics.json's."""
    runs = _runs(uri, experiment)
    parents = [r for r in runs if r.data.tags.get(tn.KIND) == "sweep"]
    children = [r for r in runs if r.data.tags.get(tn.KIND) == "job"]
    assert len(parents) == 1 and len(children) == 3, [r.data.tags.get(tn.FOLDER) for r in runs]
    [parent] = parents
    assert parent.data.tags[tn.COMPLETE] == "true"
    assert parent.data.tags[tn.FOLDER] == str(sweep.resolve())
    comparison = json.loads((sweep / "comparison.json").read_text())
    verdicts, tiers = comparison_figures(comparison)
    assert verdicts.items() <= parent.data.tags.items()
    assert tiers.items() <= parent.data.metrics.items()
    from retrieval_bench.tracking.store import TrackingStore

    store = TrackingStore.open(TrackingConfig(kind="mlflow", uri=uri))
    files = {f.path for f in store.client.list_artifacts(parent.info.run_id)}
    assert {"comparison.json", "comparison.md", "comparison.html"} <= files
    jobs = {str(p.resolve()): p for p in find_job_dirs(sweep)}
    assert len(jobs) == 3
    for child in children:
        assert child.data.tags[tn.PARENT_RUN_ID] == parent.info.run_id
        assert child.data.tags[tn.COMPLETE] == "true"
        folder = jobs.pop(child.data.tags[tn.FOLDER])
        metrics = json.loads((folder / "metrics.json").read_text())
        assert child.data.metrics == job_metrics(metrics)
        # Every file, though they upload side by side.
        uploaded = {f.path for f in store.client.list_artifacts(child.info.run_id)}
        assert uploaded == {a.logged_as.split("/")[0] for a in job_artifacts(folder)}
        assert {f.path for f in store.client.list_artifacts(child.info.run_id, "trec")} == {
            f"trec/{p.name}" for p in (folder / "trec").iterdir()
        }
    assert jobs == {}


def test_a_tracked_sweep_is_one_parent_run_and_its_jobs(
    mlflow_server: Any, tmp_path: Path, shared_cache: Path
) -> None:
    proc = _sweep(tmp_path, shared_cache, mlflow_server.url, "basic")
    assert proc.returncode == 0, proc.stderr
    said = re.search(
        rf"tracking: sweep logged to {re.escape(mlflow_server.url)} \((\d+\.\d+) s after its end\)",
        proc.stdout,
    )
    assert said is not None, proc.stdout
    _check_sweep(mlflow_server.url, "basic", tmp_path / "sweep")
    # Logged again by hand: found by its keys, nothing added.
    again = run_app(["sync", str(tmp_path / "sweep"), "--uri", mlflow_server.url,
                     "--experiment", "basic"], module="run.track")  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("(unchanged)") == 4, again.stdout
    _check_sweep(mlflow_server.url, "basic", tmp_path / "sweep")


def test_jobs_in_other_processes_get_the_parent_from_the_environment(
    mlflow_server: Any, tmp_path: Path, shared_cache: Path
) -> None:
    proc = _sweep(
        tmp_path, shared_cache, mlflow_server.url, "joblib",
        "hydra/launcher=parallel", "hydra.launcher.n_jobs=2",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    _check_sweep(mlflow_server.url, "joblib", tmp_path / "sweep")


def test_jobs_on_slurm_log_themselves_as_the_sweeps_children(
    slurm: None, mlflow_server: Any, tmp_path: Path, shared_cache: Path
) -> None:
    """The jobs run as a SLURM array on the cluster's node; each learns its parent run from the
    environment sbatch passes on and logs itself through a logger of its own."""
    proc = _sweep(tmp_path, shared_cache, mlflow_server.url, "slurm", "hydra/launcher=slurm")
    assert proc.returncode == 0, proc.stderr
    (script,) = submitted(tmp_path / "sweep")
    assert "#SBATCH --array=0-2%" in script
    _check_sweep(mlflow_server.url, "slurm", tmp_path / "sweep")


def test_a_server_killed_mid_sweep_loses_nothing_and_sync_completes_it(
    tmp_path: Path, shared_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from support.mlflow_server import MlflowServer

    server = MlflowServer(tmp_path / "server")
    server.start()
    try:
        # The sweep imports the callback that kills the server from the tests' support/.
        path = [str(ROOT / "tests"), *filter(None, [os.environ.get("PYTHONPATH")])]
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join(path))
        proc = _sweep(
            tmp_path, shared_cache, server.url, "killed",
            "+hydra.callbacks.kill._target_=support.mlflow_server.KillServer",
            f"+hydra.callbacks.kill.pid_file={server.pid_file}",
            "tracking.timeout_s=5",
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr  # the tracker is down: a warning, not an error
        sweep = tmp_path / "sweep"
        warnings = [line for line in proc.stderr.splitlines() if line.startswith("warning:")]
        assert len(warnings) == 1, proc.stderr
        assert f"log them later with: python -m run.track sync {sweep}" in warnings[0]
        assert len(find_job_dirs(sweep)) == 3  # every job folder complete
        assert not server.answers()
        server.proc = None
        server.start()  # the same store, back up
        synced = run_app(["sync", str(sweep), "--uri", server.url], module="run.track")
        assert synced.returncode == 0, synced.stderr
        _check_sweep(server.url, "killed", sweep)
    finally:
        server.stop()


def test_a_single_job_logs_itself_and_bad_settings_exit_2(
    mlflow_server: Any, tmp_path: Path, shared_cache: Path
) -> None:
    base = [*mini_overrides(tmp_path)[:-1], f"cache_dir={shared_cache}", "retriever=bm25"]
    proc = run_app([*base, f"hydra.run.dir={tmp_path / 'job'}", "tracking=mlflow",
                    f"tracking.uri={mlflow_server.url}", "tracking.experiment=single"])  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    [run] = _runs(mlflow_server.url, "single")
    metrics = json.loads((tmp_path / "job" / "metrics.json").read_text())
    assert run.data.metrics == job_metrics(metrics)
    assert run.data.params["retriever"] == "bm25"

    down = run_app([*base, "tracking=mlflow", "tracking.uri=http://127.0.0.1:9"])
    assert down.returncode == 2
    said = "config key 'tracking.uri': no MLflow server answers at http://127.0.0.1:9"
    assert said in down.stderr

    from retrieval_bench.tracking.store import TrackingStore

    client = TrackingStore.open(TrackingConfig(kind="mlflow", uri=mlflow_server.url)).client
    client.delete_experiment(client.create_experiment("gone"))
    refused = run_app(
        [*base, f"hydra.run.dir={tmp_path / 'job2'}", "tracking=mlflow",
         f"tracking.uri={mlflow_server.url}", "tracking.experiment=gone"]
    )  # fmt: skip
    assert refused.returncode == 2, refused.stderr
    assert "config key 'tracking.experiment': experiment 'gone' is deleted" in refused.stderr
    assert (tmp_path / "job2" / "report.md").is_file()  # the job folder stands

    empty = tmp_path / "empty"
    empty.mkdir()
    bad = run_app(["sync", str(empty), "--uri", mlflow_server.url], module="run.track")
    assert bad.returncode == 2
    assert f"{empty}: neither a finished job folder nor a sweep" in bad.stderr


def test_a_month_on_an_empty_disk_gates_from_the_tracker_as_from_its_folders(
    mlflow_server: Any, tmp_path: Path, shared_cache: Path
) -> None:
    """January runs on one machine (root a); February runs once on a runner with an empty disk
    (root b, `benchmark.baseline_from=tracking`) and once where January is on disk (root a, the
    folder gate): the same checks, the same verdicts."""
    common = [
        "experiment=monthly", "benchmark.retrievers=[bm25]", f"cache_dir={shared_cache}",
        "tracking=mlflow", f"tracking.uri={mlflow_server.url}", "tracking.experiment=months",
        "benchmark.gate.allow_plan_changes=[bm25]",
    ]  # fmt: skip
    january = run_app([*common, f"benchmark.root={tmp_path / 'a'}", "benchmark.month=2026-01"])
    assert january.returncode == 0, january.stderr
    assert "tracking: month 2026-01 logged" in january.stdout
    february = [*common, "benchmark.month=2026-02", "arms.bm25.k1=0.6", "arms.bm25.b=0.3"]
    tracked = run_app([*february, f"benchmark.root={tmp_path / 'b'}",
                       "benchmark.baseline_from=tracking"])  # fmt: skip
    folder = run_app([*february, f"benchmark.root={tmp_path / 'a'}"])
    assert tracked.returncode == folder.returncode, (tracked.stderr, folder.stderr)
    assert "baseline from the tracker" in tracked.stdout
    assert "earlier months 2026-01" in tracked.stdout
    gates = [
        json.loads((tmp_path / root / "2026-02" / "gate.json").read_text()) for root in ("b", "a")
    ]
    assert gates[0]["checks"] and gates[0]["checks"] == gates[1]["checks"]
    for key in ("plan_differences", "failures", "reasons", "missing", "relabelled"):
        assert gates[0][key] == gates[1][key], key
    assert (gates[0]["passed"], gates[0]["status"]) == (gates[1]["passed"], gates[1]["status"])
    assert gates[0]["baseline"].endswith(".tracked/2026-01")
    assert gates[1]["baseline"] == str(tmp_path / "a" / "2026-01")

    # No passed month in the tracker: said as the folder gate says it.
    alone = run_app([*common, f"benchmark.root={tmp_path / 'c'}", "benchmark.month=2026-03",
                     "tracking.experiment=empty", "benchmark.baseline_from=tracking"])  # fmt: skip
    assert alone.returncode == 0, alone.stderr
    assert "gate 2026-03: no baseline, nothing gated (no earlier finished month" in alone.stdout


def test_a_jobs_own_logger_loads_while_the_job_runs_and_ends_unheard_when_it_fails(
    tmp_path: Path, mini_job: Any
) -> None:
    """A single job's (or a tuning's) logger starts with the work, so MLflow loads while the
    work runs, not after it; when the work fails it is ended, having logged nothing; when the
    work ends, it logs the folder."""
    from run.tracking import own_logger

    cfg = TrackingConfig(kind="mlflow", uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    with pytest.raises(RuntimeError, match="the job failed"), own_logger(cfg) as logger:
        assert logger is not None and logger.proc.poll() is None  # started, waiting
        raise RuntimeError("the job failed")
    assert logger.proc.returncode is not None
    assert not (tmp_path / "mlflow.db").exists()  # it logged nothing

    _, folder = mini_job
    with own_logger(cfg) as logger:
        assert logger is not None
        assert log_finished(folder, cfg, logger) is None
    [run] = _runs(cfg.uri, "mini")
    assert run.data.tags[tn.FOLDER] == str(folder.resolve())
    with own_logger(TrackingConfig()) as none:
        assert none is None  # tracking=none: no process
