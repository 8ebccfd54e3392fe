"""Which kind of folder a path is, and the key its run is found again by.

* a **job** folder (`jobdir.read.is_job_dir`), logged once finished;
* a **month** folder of the monthly benchmark (`<root>/<YYYY-MM>/` with `benchmark.json`);
* a **tuning** folder (`tune.json`, `python -m run.tune`);
* a **sweep** folder: any other folder holding job folders (a multirun, a month's dataset).

A folder's key is its resolved path, as `jobdir.read.snapshot` identifies job folders: a job,
sweep or month logged again (a rerun of `run.track sync`, a resumed month, a sync after the
tracker was down) finds its run by that key and updates it, never adding a second run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from retrieval_bench.config.benchmark import MONTH
from retrieval_bench.errors import BenchError
from retrieval_bench.jobdir import names
from retrieval_bench.jobdir.read import find_job_dirs, is_job_dir, unfinished_reason
from retrieval_bench.tune.names import TUNE_JSON

JOB, SWEEP, MONTH_KIND, TUNE, TRIAL = "job", "sweep", "month", "tune", "trial"


class NotTrackable(BenchError):
    """A folder `run.track sync` cannot log: names it and why (exit 2)."""


def folder_key(path: Path) -> str:
    """The stable key of a folder's run: its resolved path."""
    return str(Path(path).resolve())


@dataclass(frozen=True)
class Folder:
    path: Path
    kind: str

    @property
    def key(self) -> str:
        return folder_key(self.path)


def is_month_dir(path: Path) -> bool:
    return bool(MONTH.fullmatch(path.name)) and (path / names.MONTH_STATE).is_file()


def classify(path: Path) -> Folder:
    """The folder's kind; NotTrackable naming the folder when it is none of them, or is a job
    that has not finished (a half-written job is never logged as if it were complete)."""
    if not path.exists():
        raise NotTrackable(f"{path}: no such folder")
    if not path.is_dir():
        raise NotTrackable(f"{path}: not a folder")
    if is_job_dir(path):
        reason = unfinished_reason(path)
        if reason is not None:
            raise NotTrackable(f"{path}: not a finished job ({reason})")
        return Folder(path, JOB)
    if is_month_dir(path):
        return Folder(path, MONTH_KIND)
    if (path / TUNE_JSON).is_file():
        return Folder(path, TUNE)
    if find_job_dirs(path):
        return Folder(path, SWEEP)
    raise NotTrackable(
        f"{path}: neither a finished job folder nor a sweep, benchmark month or tuning folder "
        f"(no {names.METRICS}, {names.MONTH_STATE} or {TUNE_JSON} there or below)"
    )
