"""A tuning folder (`python -m run.tune`) logged: the tuning as a parent run (kind `tune`), each
trial of each of its Optuna studies (`all`, `fold-<i>`) a child run (kind `trial`).

The parent: the tuned and held-out scores and their gap, each fold's train and test scores,
the baseline's score, per type (`tuned/<metric>/<type>`, `held_out/...`), as metrics; the search
settings as params; tune.json, tune.md and tuned.yaml as artifacts. A trial: its sampled values
as params, its objective value as the metric `objective`, its study, number and state as tags.
Trials are read from the folder's own Optuna storage, so a tuning logged later logs the same.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from retrieval_bench.jobdir.files import read_json
from retrieval_bench.tracking import names as tn
from retrieval_bench.tracking.content import Artifact, RunContent, number
from retrieval_bench.tracking.folders import TRIAL, TUNE, folder_key
from retrieval_bench.tracking.store import LoggedRun, TrackingStore
from retrieval_bench.tune.names import STUDY_DB, TUNE_JSON, TUNE_MD, TUNED_YAML


def tuning_content(folder: Path, summary: dict[str, Any]) -> RunContent:
    content = RunContent(kind=TUNE, key=folder_key(folder), name=f"tune {folder.name}")
    metric = str(summary.get("metric", "objective"))
    figures = {
        "tuned_score": summary.get("tuned_score"),
        "held_out_score": summary.get("held_out_score"),
        "baseline_score": (summary.get("baseline") or {}).get("score"),
    }
    figures["gap"] = summary.get("gap")
    for fold in summary.get("folds") or []:
        figures[f"fold/{fold.get('fold')}/train_score"] = fold.get("train_score")
        figures[f"fold/{fold.get('fold')}/test_score"] = fold.get("test_score")
    for qtype, row in (summary.get("by_type") or {}).items():
        for column, value in (row or {}).items():
            figures[f"by_type/{column}/{qtype}"] = value
    for name, value in figures.items():
        found = number(value)
        if found is not None:
            content.metrics[tn.metric_name(*name.split("/"))] = found
    settings = summary.get("settings") or {}
    content.params = {tn.metric_name(k): str(v) for k, v in settings.items()}
    content.params["metric"] = metric
    content.params["stage"] = str(summary.get("stage", ""))
    content.params["dataset"] = str(summary.get("dataset", ""))
    chosen = (summary.get("tuned") or {}).get("chosen") or []
    content.tags["rb.tuned"] = " ".join(str(c) for c in chosen)[:8000]
    content.tags[tn.DATASET] = str(summary.get("dataset", ""))
    content.artifacts = [
        Artifact(folder / n) for n in (TUNE_JSON, TUNE_MD, TUNED_YAML) if (folder / n).is_file()
    ]
    return content


def trial_contents(folder: Path) -> list[RunContent]:
    """Every finished trial of every study in the folder's Optuna storage."""
    if not (folder / STUDY_DB).is_file():
        return []
    import optuna

    from retrieval_bench.tune.study import storage_url

    storage = storage_url(folder)
    out = []
    for name in sorted(optuna.get_all_study_names(storage)):
        study = optuna.load_study(study_name=name, storage=storage)
        for trial in study.get_trials(deepcopy=False):
            if not trial.state.is_finished():
                continue
            content = RunContent(
                kind=TRIAL,
                key=f"{folder_key(folder)}#{name}#{trial.number}",
                name=f"{name} trial {trial.number}",
                timestamp_ms=int(trial.datetime_complete.timestamp() * 1000)
                if trial.datetime_complete
                else 0,
            )
            content.params = {tn.metric_name(k): str(v) for k, v in trial.params.items()}
            value = number(trial.value)
            if value is not None:
                content.metrics["objective"] = value
            content.tags.update(
                {"rb.study": name, "rb.trial": str(trial.number), "rb.state": trial.state.name}
            )
            out.append(content)
    return out


def log_tuning(
    store: TrackingStore, experiment_for: Callable[[str], str], folder: Path
) -> tuple[LoggedRun, dict[str, LoggedRun]]:
    """The tuning's run and its trials' runs (by key), in the experiment of its dataset."""
    summary = read_json(folder / TUNE_JSON) or {}
    experiment_id = store.experiment_id(experiment_for(str(summary.get("dataset") or folder.name)))
    parent = store.log(tuning_content(folder, summary), experiment_id)
    return parent, store.log_children(trial_contents(folder), parent)
