"""Benchmark months on disk: `<root>/<YYYY-MM>/` with its `benchmark.json` state file.

A month folder holds one job folder per dataset x retriever (`<dataset>/<retriever>/`), the
comparison per dataset, `gate.json`/`gate.md`, and `benchmark.json`: the plan the month was
started with (datasets, retrievers, the overrides applied to every job), its fingerprint, and
`status` (`running` until every planned job has finished, then `finished`). Only finished
months are drawn in the trend; only finished months whose gate passed (`gate.json` `status`)
are baselines, unless one is pinned.

Every folder the benchmark writes is derived from config (root, month, dataset name, retriever
option); `inside` refuses any that would resolve outside its root, naming the key.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval_bench.config.benchmark import MONTH
from retrieval_bench.errors import BenchError, ConfigError
from retrieval_bench.io.atomic import atomic_write_json
from retrieval_bench.jobdir import names
from retrieval_bench.jobdir.files import read_gate_record, read_month_state
from retrieval_bench.jobdir.read import (
    FinishedJob,
    find_job_dirs,
    is_finished,
    is_job_dir,
    unfinished_reason,
)

RUNNING, FINISHED = "running", "finished"
# A month's gate status (gate.json `status`). Only PASSED and NO_BASELINE (the first month,
# the reference everything after it is gated against) make a month a baseline.
PASSED, FAILED, NO_BASELINE, NOT_GATED = "passed", "failed", "no baseline", "not gated"
BASELINE_STATUSES = (PASSED, NO_BASELINE)


class BenchmarkError(BenchError):
    """The benchmark cannot go on; the message says what to do."""


def fingerprint(plan: Mapping[str, Any]) -> str:
    text = json.dumps(plan, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def write_state(month_dir: Path, state: Mapping[str, Any]) -> None:
    atomic_write_json(month_dir / names.MONTH_STATE, dict(state))


def is_finished_month(month_dir: Path) -> bool:
    state = read_month_state(month_dir) if month_dir.is_dir() else None
    return bool(state) and state.get("status") == FINISHED  # type: ignore[union-attr]


def finished_months(root: Path) -> list[Path]:
    """Finished month folders under `root`, oldest first."""
    if not root.is_dir():
        return []
    months = [p for p in root.iterdir() if p.is_dir() and MONTH.fullmatch(p.name)]
    return sorted((p for p in months if is_finished_month(p)), key=lambda p: p.name)


@dataclass(frozen=True)
class JobKey:
    """A job's place in a month: the dataset it ran on and the retriever option it used."""

    dataset: str
    retriever: str

    def __str__(self) -> str:
        return f"{self.dataset}/{self.retriever}"


def job_key(job: FinishedJob) -> JobKey:
    return JobKey(job.dataset, job.choices.get("retriever") or job.value_of("retriever.name"))


def month_jobs(month_dir: Path, finished_only: bool = True) -> dict[JobKey, FinishedJob]:
    """The job folders of a month by (dataset, retriever)."""
    jobs: dict[JobKey, FinishedJob] = {}
    if not month_dir.is_dir():
        return jobs
    for path in find_job_dirs(month_dir):
        if finished_only and not is_finished(path):
            continue
        job = FinishedJob.load(path)
        jobs[job_key(job)] = job
    return jobs


def job_folder_state(job_dir: Path) -> str | None:
    """Why a month's job folder is not finished (`jobdir.read.unfinished_reason`: a job killed
    outright reads `interrupted (process N is gone)`), `no job folder` when it never started;
    None when it is finished."""
    return unfinished_reason(job_dir) if is_job_dir(job_dir) else "no job folder"


def planned_done(jobs: Iterable[FinishedJob]) -> set[tuple[str, str]]:
    """(dataset option, retriever option) pairs of a month's finished jobs (`month_jobs`)."""
    done = set()
    for job in jobs:
        dataset = job.choices.get("dataset")
        retriever = job.choices.get("retriever")
        if dataset and retriever:
            done.add((dataset, retriever))
    return done


def gate_status(month_dir: Path) -> str | None:
    """What a month's own gate said (`passed`, `failed`, `no baseline`, `not gated`), or None
    when it has no gate result. A gate.json written before statuses were recorded counts as
    passed only if it passed with at least one check."""
    record = read_gate_record(month_dir)
    if record is None:
        return None
    status = record.get("status")
    if isinstance(status, str):
        return status
    if record.get("baseline") is None:
        return NO_BASELINE
    checked = any(c.get("n", 0) > 0 for c in record.get("checks") or [])
    return PASSED if record.get("passed") is True and checked else FAILED


@dataclass(frozen=True)
class Baseline:
    """What the gate compares against, and why (said in the gate report).

    `path` None: nothing to compare against; `first` tells the first benchmark (nothing gated,
    passes) from earlier months none of which passed its gate (the gate fails: a month is never
    waved through because every candidate baseline was itself bad).
    """

    path: Path | None
    reason: str
    first: bool = False


def resolve_baseline(root: Path, month: str, baseline: str) -> Baseline:
    """The month folder to gate against: the latest earlier finished month whose gate passed,
    or the one pinned by `benchmark.baseline` (a month or a folder), whatever its gate said."""
    if baseline in ("", "previous"):
        earlier = [p for p in finished_months(root) if p.name < month]
        if not earlier:
            return Baseline(None, "no earlier finished month: the first benchmark", first=True)
        skipped: list[str] = []
        for path in reversed(earlier):
            status = gate_status(path)
            if status in BASELINE_STATUSES:
                why = f"{path.name}: the latest earlier finished month whose gate passed"
                if status == NO_BASELINE:
                    why += " (the first benchmark month)"
                if skipped:
                    why += f"; skipped {', '.join(skipped)}"
                return Baseline(path, why)
            skipped.append(f"{path.name} (gate {status or 'never ran'})")
        return Baseline(
            None,
            f"no earlier finished month passed its gate ({', '.join(skipped)}); review one and "
            "pin it with benchmark.baseline=YYYY-MM",
        )
    if MONTH.fullmatch(baseline):
        path = root / baseline
        if baseline == month:
            raise BenchmarkError(f"benchmark.baseline={baseline} is the month being run")
        if not is_finished_month(path):
            raise BenchmarkError(
                f"benchmark.baseline={baseline}: {path} is not a finished benchmark month"
            )
    else:
        path = Path(baseline).expanduser()
        if not path.is_dir() or not find_job_dirs(path):
            raise BenchmarkError(f"benchmark.baseline={baseline}: no job folders there")
    status = gate_status(path)
    return Baseline(
        path, f"pinned by benchmark.baseline={baseline} (its own gate: {status or 'never ran'})"
    )


def inside(root: Path, path: Path, key: str) -> Path:
    """`path`, once it is known to resolve within `root` (symlinks followed); else the
    ConfigError naming `key`, the config value that would have put it elsewhere."""
    resolved_root = root.resolve()
    resolved = path.resolve()
    if not resolved.is_relative_to(resolved_root):
        raise ConfigError(key, f"{path} resolves to {resolved}, outside {resolved_root}")
    return path


def folder_name_problem(name: str) -> str:
    """Why `name` cannot be one folder of a benchmark month ('' when it can): a path, or a
    hidden or `_`-prefixed folder (never searched for jobs, so its jobs would be run again)."""
    if not name:
        return "is empty"
    if name in (".", "..") or any(sep in name for sep in ("/", "\\", "\0")):
        return f"{name!r} is not a single folder name"
    if name.startswith((".", "_")):
        return f"{name!r} starts with '{name[0]}': such folders are not searched for jobs"
    if "$" in name:
        return f"{name!r} holds '$', which Hydra would read as an interpolation"
    return ""


@contextlib.contextmanager
def month_lock(month_dir: Path) -> Iterator[None]:
    """One benchmark run per month folder at a time (a second one fails at once)."""
    month_dir.mkdir(parents=True, exist_ok=True)
    with (month_dir / names.MONTH_LOCK).open("a+b") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BenchmarkError(
                f"{month_dir} is being run by another benchmark process; wait for it to end"
            ) from None
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
