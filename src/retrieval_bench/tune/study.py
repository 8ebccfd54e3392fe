"""Optuna's studies for one tuning, in one SQLite file: one study on all queries (`all`) and one
per fold (`fold-<i>`, searched on the other folds). The storage is Optuna's own (RDBStorage),
so a run killed halfway resumes from what it stored and optuna-dashboard opens the file.

Each study records the plan it belongs to (space, folds, metric, job overrides) as a user
attribute; a rerun in the same folder under another plan is refused instead of mixing trials of
two searches. A study runs trials until `trials` are finished (complete, or pruned because the
job refused the combination); a trial a killed run had not finished was never stored, so
finished trials are never redone and unfinished ones are run again. Trials run against an
in-memory copy of each study and are stored one commit each as they finish (`Study`)."""

from __future__ import annotations

import contextlib
import logging
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import optuna
import sqlalchemy
from optuna.trial import FrozenTrial, TrialState

from retrieval_bench.config.tune import SAMPLERS
from retrieval_bench.errors import BenchError, ConfigError
from retrieval_bench.tune.names import STUDY_DB

ALL_QUERIES = "all"
FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)
PLAN_ATTR = "plan"


def fold_study(fold: int) -> str:
    return f"fold-{fold}"


# How long a write waits for another process's lock on the study file before it is refused.
BUSY_TIMEOUT_S = 60.0


class StudyFileError(BenchError):
    """The study's SQLite file cannot be used: corrupt or truncated, locked by another process,
    or on a disk that refuses the write. One line naming the file and what to do (exit 2)."""


# SQLite's result codes (Python 3.11's `sqlite_errorname`; the message's words before) -> what
# happened to the study file and what to do about it.
_STUDY_FAULTS = (
    (
        ("SQLITE_NOTADB", "SQLITE_CORRUPT", "not a database", "malformed"),
        "is corrupt or truncated",
        "move it away to start this tuning afresh (its trials are lost), or put back a copy",
    ),
    (
        ("SQLITE_BUSY", "SQLITE_LOCKED", "database is locked", "database table is locked"),
        "is locked by another process (an optuna-dashboard or sqlite3 session writing to it?)",
        "close that, then rerun the same command to resume",
    ),
    (
        ("SQLITE_READONLY", "readonly database"),
        "cannot be written (a read-only file or file system)",
        "make it writable, or give another tune.dir",
    ),
    (
        ("SQLITE_FULL", "database or disk is full"),
        "cannot grow: the disk is full",
        "free space there, or give another tune.dir",
    ),
    (
        ("SQLITE_CANTOPEN", "unable to open database file", "SQLITE_IOERR", "disk I/O error"),
        "cannot be opened or read",
        "check the folder's permissions and disk, or give another tune.dir",
    ),
)


@contextlib.contextmanager
def study_file_faults(folder: Path) -> Iterator[None]:
    """Within the block, SQLite refusing the study file (`_STUDY_FAULTS`) is a StudyFileError
    naming it; the file is left as it was (each trial is stored in one commit, so nothing
    stored is half-written)."""
    try:
        yield
    except (sqlalchemy.exc.DBAPIError, optuna.exceptions.StorageInternalError) as exc:
        # Optuna raises its own error from SQLAlchemy's, which holds SQLite's own.
        found: BaseException | None = exc
        while found is not None and not isinstance(found, sqlalchemy.exc.DBAPIError):
            found = found.__cause__
        if found is None:
            raise
        cause = found.orig
        said = f"{getattr(cause, 'sqlite_errorname', '')} {cause}"
        for marks, what, todo in _STUDY_FAULTS:
            if any(mark in said for mark in marks):
                raise StudyFileError(
                    f"{folder / STUDY_DB}: the study file {what} ({cause}); {todo}"
                ) from exc
        raise


def storage_url(folder: Path) -> str:
    return f"sqlite:///{(folder / STUDY_DB).resolve()}"


def sqlite_storage(folder: Path) -> optuna.storages.RDBStorage:
    """Optuna's RDB storage on the folder's SQLite file, in write-ahead-log mode with
    `synchronous=NORMAL`: Optuna commits every parameter and attribute on its own, and a full
    fsync per commit cost more than the trials themselves. A killed process loses nothing
    (the log is the OS's once written); only a power cut may lose the last commits."""
    storage = optuna.storages.RDBStorage(
        storage_url(folder), engine_kwargs={"connect_args": {"timeout": BUSY_TIMEOUT_S}}
    )
    sqlalchemy.event.listen(storage.engine, "connect", _fast_sqlite)
    storage.engine.dispose()  # connections opened before the listener close
    return storage


def _fast_sqlite(connection: Any, _record: Any) -> None:
    cursor = connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def study_index(name: str) -> int:
    """0 for the study on all queries, fold + 1 for a fold's (`fold_study`)."""
    return 0 if name == ALL_QUERIES else int(name.removeprefix("fold-")) + 1


def sampler_seed(seed: int, name: str) -> int:
    """The seed of study `name`'s sampler, derived from the run's `tune.seed`: numpy's
    `SeedSequence(seed, spawn_key=(study_index(name),))`, its first 32-bit word.

    Why one per study: seeded alike, every fold's study and the one on all queries draw the
    same first trials (TPE's start-up trials are its random ones), so each fold's choice is
    mostly the same configuration and the held-out estimate barely exercises the selection it
    is there to measure. Distinct, independent streams (SeedSequence's spawning) keep the run
    reproducible from the one seed, and tune.json states each one."""
    return int(np.random.SeedSequence(seed, spawn_key=(study_index(name),)).generate_state(1)[0])


# How tune.json's `sampler_seeds` follow from `tune.seed` (`sampler_seed`).
SAMPLER_SEED_RULE = (
    "numpy SeedSequence(tune.seed, spawn_key=(i,)).generate_state(1)[0], i = 0 for the study "
    "on all queries and fold + 1 for a fold's"
)


def sampler_seeds(seed: int, folds: int) -> dict[str, int]:
    """Every study's sampler seed (`sampler_seed`), by study name: `all`, `fold-0`, ..."""
    names = [ALL_QUERIES, *(fold_study(f) for f in range(folds))]
    return {name: sampler_seed(seed, name) for name in names}


def make_sampler(name: str, seed: int) -> optuna.samplers.BaseSampler:
    """A sampler, seeded with `seed` (a study's `sampler_seed`; `tune.sampler`: SAMPLERS)."""
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "qmc":
        return optuna.samplers.QMCSampler(seed=seed, scramble=True, warn_independent_sampling=False)
    raise ConfigError("tune.sampler", f"{name!r} is not one of: {', '.join(SAMPLERS)}")


def quiet_optuna() -> None:
    """Optuna logs every trial at INFO; the tuning shows its own progress line instead."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    logging.getLogger("alembic").setLevel(logging.WARNING)


@dataclass
class Study:
    """One study: `stored` in the SQLite file (what resumes, and what optuna-dashboard shows),
    `live` in memory with the sampler, holding the stored trials and every new one. Optuna's
    RDB storage commits each parameter and attribute on its own (about 15 commits a trial,
    most of a trial's time on a loaded machine), so trials run against memory and each
    finished one is stored in one commit, as soon as it finishes."""

    stored: optuna.Study
    live: optuna.Study

    @property
    def name(self) -> str:
        return self.stored.study_name


def open_study(
    storage: optuna.storages.BaseStorage,
    name: str,
    sampler: optuna.samplers.BaseSampler,
    direction: Literal["minimize", "maximize"],
    plan: Mapping[str, Any],
    folder: Path,
) -> Study:
    """The study `name` (created, or loaded to resume) after checking it belongs to `plan`,
    with its finished trials in the sampler's history."""
    stored = optuna.create_study(
        storage=storage, study_name=name, direction=direction, load_if_exists=True
    )
    recorded = stored.user_attrs.get(PLAN_ATTR)
    if recorded is None:
        stored.set_user_attr(PLAN_ATTR, dict(plan))
    elif recorded != dict(plan):
        changed = sorted(k for k in {*recorded, *plan} if recorded.get(k) != plan.get(k))
        raise ConfigError(
            "tune.dir",
            f"{folder} holds a tuning of another plan (it differs in {', '.join(changed)}): "
            "rerun with its settings to resume it, or give another tune.dir",
        )
    live = optuna.create_study(sampler=sampler, direction=direction, study_name=name)
    live.add_trials(stored.get_trials(deepcopy=False, states=FINISHED))
    return Study(stored, live)


def finished(study: Study) -> int:
    return len(study.live.get_trials(deepcopy=False, states=FINISHED))


def run_trials(
    study: Study,
    trials: int,
    objective: Callable[[optuna.Trial], float],
    after_trial: Callable[[], None],
) -> None:
    """Trials until `trials` are finished, each stored as it finishes; `after_trial` is
    called after each one."""

    def store(_live: optuna.Study, trial: FrozenTrial) -> None:
        if trial.state in FINISHED:
            study.stored.add_trial(trial)
        after_trial()

    left = trials - finished(study)
    if left > 0:
        study.live.optimize(objective, n_trials=left, callbacks=[store])


def best_trial(study: Study) -> FrozenTrial:
    """The best complete trial; ConfigError naming `tune.space` when the job refused every
    combination tried (with the most frequent reason)."""
    live = study.live
    complete = live.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if not complete:
        reasons = [t.user_attrs.get("refused", "") for t in live.get_trials(deepcopy=False)]
        common = max(set(reasons), key=reasons.count) if reasons else "no trial ran"
        raise ConfigError(
            "tune.space",
            f"study '{study.name}': the job refused every configuration tried, e.g. {common}",
        )
    return live.best_trial


def trial_counts(study: Study) -> dict[str, int]:
    """The stored trials by state (what a resumed run starts from)."""
    states = Counter(t.state.name.lower() for t in study.stored.get_trials(deepcopy=False))
    return dict(sorted(states.items()))
