"""Logging folders to the tracker: what `python -m run.track sync` and the live loggers do.

Every folder is logged by its key (`tracking.folders`), so syncing twice, or after a live logger
logged part of a sweep, completes what is missing and duplicates nothing:

* a job: one run (its parent: the sweep run given, or the run of the folder above it if that
  folder was logged);
* a sweep: a parent run holding the comparison, its finished jobs as children
  (`mlflow.parentRunId`), each tagged with its place in the sweep (`rb.relpath`);
* a benchmark month: one parent run per dataset folder (kind `month`, tags `rb.month`,
  `rb.gate`), holding the comparison, the month's benchmark.json/gate.json/gate.md and the
  trend, with the dataset's jobs as children;
* a tuning folder: `tracking.tune_log`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from retrieval_bench.config.tracking import TrackingConfig
from retrieval_bench.jobdir.read import FinishedJob, find_job_dirs, scan_jobs
from retrieval_bench.tracking import names as tn
from retrieval_bench.tracking.content import (
    default_config,
    job_content,
    month_content,
    sweep_content,
)
from retrieval_bench.tracking.folders import (
    JOB,
    MONTH_KIND,
    SWEEP,
    TUNE,
    Folder,
    NotTrackable,
    classify,
    folder_key,
)
from retrieval_bench.tracking.store import LoggedRun, TrackerDown, TrackingStore
from retrieval_bench.tracking.tune_log import log_tuning


@dataclass
class Synced:
    """What one sync logged: a line per run, and the folders it could not (with why)."""

    lines: list[str] = field(default_factory=list)
    runs: dict[str, LoggedRun] = field(default_factory=dict)  # folder key -> its run


class Syncer:
    """Logs folders into one store. `experiment`: tracking.experiment ('' = each folder's
    dataset name)."""

    def __init__(self, store: TrackingStore, experiment: str = "") -> None:
        self.store = store
        self.experiment = experiment
        self._defaults: dict[str, Any] | None = None
        self.synced = Synced()
        # Sweeps opened by `open_sweep` (folder key -> their run, not searched for again at the
        # end), and the runs it created for a sweep folder that was new: a job handed to this
        # logger under one of them has no run yet.
        self._opened: dict[str, LoggedRun] = {}
        self._new_parents: set[str] = set()

    def experiment_for(self, dataset: str) -> str:
        return self.experiment or dataset

    def folder(self, folder: Folder, parent_id: str | None = None) -> None:
        if folder.kind == JOB:
            self.job(folder.path, parent_id=parent_id or self.logged_parent(folder.path))
        elif folder.kind == SWEEP:
            self.sweep(folder.path)
        elif folder.kind == MONTH_KIND:
            self.month(folder.path)
        elif folder.kind == TUNE:
            parent, trials = log_tuning(self.store, self.experiment_for, folder.path)
            self.record(parent, folder.path, TUNE)
            self.synced.runs.update(trials)
            self.synced.lines.append(f"  and its {len(trials)} trials as children")

    def job(
        self,
        path: Path,
        parent_id: str | None = None,
        relpath: str | None = None,
        handed: bool = False,
    ) -> LoggedRun:
        """`handed`: the process that ran the job handed it to this (live) logger, which is then
        the only one to log it."""
        job = FinishedJob.load(path)
        if self._defaults is None:
            self._defaults = default_config()
        content = job_content(job, folder_key(path), self._defaults)
        if relpath:
            content.tags[tn.RELPATH] = relpath
        if parent_id:
            experiment_id = self.store.experiment_of(parent_id)
        else:
            experiment_id = self.store.experiment_id(self.experiment_for(job.dataset))
        if handed and parent_id in self._new_parents:
            logged = self.store.log_onto(content, None, experiment_id, parent_id)
        else:
            logged = self.store.log(content, experiment_id, parent_id)
        return self.record(logged, path, "job")

    def open_sweep(self, path: Path, dataset: str, new_folder: bool = False) -> LoggedRun:
        """A sweep's parent run as the sweep starts: found or created, and incomplete until its
        comparison is logged at the end (`sweep`). `new_folder`: the sweep's folder held no job
        when the sweep started; if its run is created now, no job under it was logged before (a
        run's key is its folder's path), so the jobs handed to this logger are created without
        a search each (jobs that other processes ran log themselves, and are searched for)."""
        key = folder_key(path)
        content = sweep_content(path, key)
        experiment_id = self.store.experiment_id(self.experiment_for(dataset))
        opened = self.store.find_or_create(content, experiment_id)
        self._opened[key] = opened
        if opened.created and new_folder:
            self._new_parents.add(opened.run_id)
        return self.record(opened, path, "sweep")

    def sweep(
        self, path: Path, kind: str = SWEEP, skip: Iterable[str] = (), dataset: str = ""
    ) -> LoggedRun:
        """The sweep's parent run with its comparison, then each finished job under it (but
        those whose keys are in `skip`: logged already by this syncer, and not read again: the
        live logger's sweep ends with this, and its last job's folder is large). `dataset`:
        the experiment's dataset when no job is read."""
        skipped = set(skip)
        dirs = find_job_dirs(path)
        scan = scan_jobs([d for d in dirs if folder_key(d) not in skipped] if dirs else [path])
        for line in scan.skipped_lines():
            self.synced.lines.append(f"not logged: {line}")
        dataset = scan.jobs[0].dataset if scan.jobs else dataset or path.name
        key = folder_key(path)
        content = month_content(path, key) if kind == MONTH_KIND else sweep_content(path, key)
        experiment_id = self.store.experiment_id(self.experiment_for(dataset))
        opened = self._opened.pop(key, None)
        if opened is not None:  # as `open_sweep` left it: this process's logging adds children only
            logged = self.store.log_onto(content, opened.run, experiment_id, None)
        else:
            logged = self.store.log(content, experiment_id)
        parent = self.record(logged, path, kind)
        for job in scan.jobs:
            relpath = job.path.resolve().relative_to(path.resolve()).as_posix()
            self.job(job.path, parent_id=parent.run_id, relpath=relpath)
        return parent

    def month(self, month_dir: Path) -> list[LoggedRun]:
        """Each dataset folder of a month as a `month` parent run with its jobs."""
        datasets = sorted({d.parent for d in find_job_dirs(month_dir) if d.parent != month_dir})
        return [self.sweep(d, kind=MONTH_KIND) for d in datasets]

    def logged_parent(self, job_dir: Path) -> str | None:
        """The run of the folder above a job, when that folder (a sweep) was logged."""
        above = job_dir.resolve().parent
        run = self.store.find(folder_key(above))
        return None if run is None else str(run.info.run_id)

    def record(self, logged: LoggedRun, path: Path, kind: str) -> LoggedRun:
        how = "created" if logged.created else ("unchanged" if logged.skipped else "updated")
        self.synced.lines.append(f"{kind} {path}: run {logged.run_id} ({how})")
        self.synced.runs[folder_key(path)] = logged
        return logged


def sync_folders(
    paths: Iterable[Path], cfg: TrackingConfig, parent_id: str | None = None
) -> Synced:
    """Log each folder (classified first, so a folder that is not one fails before anything is
    logged: NotTrackable, exit 2)."""
    folders = [classify(Path(p)) for p in paths]
    syncer = Syncer(TrackingStore.open(cfg), cfg.experiment)
    for folder in folders:
        syncer.folder(folder, parent_id)
    return syncer.synced


# -- the live logger's side of the protocol (run.tracking starts it) --------------------------
def serve(
    cfg: TrackingConfig,
    requests: IO[str],
    say: Callable[[str], None],
    sweep_dir: Path | None = None,
    dataset: str = "",
    parent_id: str | None = None,
    new_folder: bool = False,
) -> int:
    """A live logger (`run.tracking.LiveLogger`). With `sweep_dir` (`new_folder`: it held no
    job when the sweep started): create the sweep's parent run and say `parent <run id>`
    first. Then log each `job <folder>` line (a child of the parent run, or of `parent_id`)
    and say `logged <folder>`, or `failed <folder>`; say
    `down <why>` once when the tracker stops answering (what is left is then not tried: the
    closing warning names `run.track sync`). On `end` (or end of input) a sweep's logger logs
    the comparison and any finished job under the sweep not logged yet. Exit status: 0 all
    logged, 1 something was not, 2 the tracker refused a setting (`refused <why>`)."""
    from retrieval_bench.tracking.store import TrackerRefused

    down: str | None = None
    failed = 0
    try:
        syncer = Syncer(TrackingStore.open(cfg), cfg.experiment)
        if sweep_dir is not None:
            parent_id = syncer.open_sweep(sweep_dir, dataset, new_folder).run_id
            say(f"parent {parent_id}")
    except TrackerRefused as exc:
        say(f"refused {exc}")
        return 2
    except TrackerDown as exc:
        down = str(exc)
        say(f"down {down}")
    for line in requests:
        command, _, arg = line.rstrip("\n").partition(" ")
        if command == "end":
            break
        if command != "log":
            continue
        if down is not None:
            failed += 1
            say(f"failed {arg}")
            continue
        try:
            folder = classify(Path(arg))
            if folder.kind == JOB:
                relpath = _relpath(folder.path, sweep_dir) if sweep_dir is not None else None
                parent = parent_id or syncer.logged_parent(folder.path)
                syncer.job(folder.path, parent, relpath, handed=True)
            else:
                syncer.folder(folder)
            say(f"logged {arg}")
        except (TrackerRefused, NotTrackable) as exc:
            say(f"refused {exc}")
            return 2
        except TrackerDown as exc:
            down = str(exc)
            failed += 1
            say(f"down {down}")
            say(f"failed {arg}")
    if down is None and sweep_dir is not None:
        try:  # the comparison, and any finished job not handed over (e.g. logged by no one)
            handed = {key for key, run in syncer.synced.runs.items() if run.run_id != parent_id}
            syncer.sweep(sweep_dir, skip=handed, dataset=dataset)
            say("sweep logged")
        except TrackerDown as exc:
            down = str(exc)
            say(f"down {down}")
    return 0 if down is None and not failed else 1


def _relpath(job_dir: Path, sweep_dir: Path) -> str | None:
    try:
        return job_dir.resolve().relative_to(sweep_dir.resolve()).as_posix()
    except ValueError:
        return None
