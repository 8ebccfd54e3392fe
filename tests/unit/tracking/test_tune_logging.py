"""A tuning folder logged: the tuning is one run with its scores and files, each finished trial
of each of its Optuna studies (read from the folder's own storage) a child run with its sampled
values and objective; logging again duplicates nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from retrieval_bench.config.tracking import TrackingConfig
from retrieval_bench.tracking import names as tn
from retrieval_bench.tracking.sync import sync_folders
from retrieval_bench.tune.names import TUNE_JSON, TUNE_MD, TUNED_YAML


def _tuning(folder: Path) -> dict[str, dict[int, float]]:
    """A tuning folder: two real Optuna studies in its storage (one trial pruned), and the
    summary files `run.tune` writes; returns each study's finished trials' values."""
    import optuna

    from retrieval_bench.tune.study import storage_url

    folder.mkdir()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    values: dict[str, dict[int, float]] = {}
    for name in ("all", "fold-0"):
        study = optuna.create_study(study_name=name, storage=storage_url(folder))
        values[name] = {}
        for i in range(3):
            trial = study.ask()
            k = trial.suggest_int("combiners.rrf.k", 10, 100)
            if i == 2:
                study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                continue
            study.tell(trial, k / 100)
            values[name][trial.number] = k / 100
    summary = {
        "metric": "ndcg@6", "stage": "final", "dataset": "travel",
        "settings": {"trials": 3, "folds": 1, "seed": 0},
        "folds": [{"fold": 0, "train_score": 0.61, "test_score": 0.58}],
        "tuned": {"chosen": ["combiners.rrf.k=42"]},
        "tuned_score": 0.62, "held_out_score": 0.58, "gap": 0.04,
        "baseline": {"score": 0.55},
        "by_type": {"negation": {"tuned": 0.4, "held_out": 0.35}},
    }  # fmt: skip
    (folder / TUNE_JSON).write_text(json.dumps(summary))
    (folder / TUNE_MD).write_text("# tuning\n")
    (folder / TUNED_YAML).write_text("retriever:\n  rrf_k: 42\n")
    return values


def test_a_tuning_is_one_run_and_each_trial_a_child(tmp_path: Path) -> None:
    folder = tmp_path / "tune"
    values = _tuning(folder)
    cfg = TrackingConfig(kind="mlflow", uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    sync_folders([folder], cfg)

    from retrieval_bench.tracking.store import TrackingStore

    store = TrackingStore.open(cfg)
    runs = store.runs(store.experiment_id("travel"))
    [parent] = [r for r in runs if r.data.tags[tn.KIND] == "tune"]
    assert parent.data.metrics["tuned_score"] == 0.62
    assert parent.data.metrics["held_out_score"] == 0.58
    assert parent.data.metrics["fold/0/test_score"] == 0.58
    assert parent.data.metrics["by_type/held_out/negation"] == 0.35
    assert parent.data.params["metric"] == "ndcg@6"
    assert parent.data.tags["rb.tuned"] == "combiners.rrf.k=42"
    files = {f.path for f in store.client.list_artifacts(parent.info.run_id)}
    assert files == {TUNE_JSON, TUNE_MD, TUNED_YAML}
    trials = [r for r in runs if r.data.tags[tn.KIND] == "trial"]
    assert len(trials) == 6  # every finished trial, the pruned ones included
    for trial in trials:
        assert trial.data.tags[tn.PARENT_RUN_ID] == parent.info.run_id
        study, number = trial.data.tags["rb.study"], int(trial.data.tags["rb.trial"])
        if trial.data.tags["rb.state"] == "PRUNED":
            assert "objective" not in trial.data.metrics
        else:
            assert trial.data.metrics["objective"] == values[study][number]
            assert int(trial.data.params["combiners.rrf.k"]) == round(values[study][number] * 100)

    again = sync_folders([folder], cfg)
    assert "(unchanged)" in again.lines[0]
    assert len(store.runs(store.experiment_id("travel"))) == 7


def test_a_tunings_trials_are_looked_up_once_and_each_logged_in_one_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 50-trial, 5-fold tuning has 300 trials: a search and two tag requests each, as every
    run had, made its logging take longer than the tuning itself. One search finds them all
    among the tuning's children; a trial (no files) is its run, one batch, and its end."""
    from mlflow.tracking import MlflowClient

    calls: list[str] = []
    for name in ("search_runs", "create_run", "log_batch", "set_tag", "set_terminated"):
        method = getattr(MlflowClient, name)

        def counted(*args: Any, _method: Any = method, _name: str = name, **kw: Any) -> Any:
            calls.append(_name)
            return _method(*args, **kw)

        monkeypatch.setattr(MlflowClient, name, counted)
    folder = tmp_path / "tune"
    _tuning(folder)
    cfg = TrackingConfig(kind="mlflow", uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    sync_folders([folder], cfg)
    trials = 6
    assert calls.count("search_runs") == 2  # the tuning's run by its key, then its children
    assert calls.count("set_tag") == 0
    assert calls.count("create_run") == calls.count("set_terminated") == 1 + trials
    assert calls.count("log_batch") == 2 + trials  # the tuning's values and its completion

    calls.clear()
    again = sync_folders([folder], cfg)
    assert sum("(unchanged)" in line for line in again.lines) == 1
    assert calls == ["search_runs", "search_runs"]  # everything found complete: nothing sent
