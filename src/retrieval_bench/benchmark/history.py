"""Benchmark months on disk: `<root>/<YYYY-MM>/` with its `benchmark.json` state file.

A month folder holds one job folder per dataset x retriever (`<dataset>/<retriever>/`), the
comparison per dataset, `gate.json`/`gate.md`, and `benchmark.json`: the plan the month was
started with (datasets, retrievers, the overrides applied to every job), its fingerprint, and
`status` (`running` until every planned job has finished, then `finished`). Only finished
months are used as baselines or drawn in the trend.
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

from retrieval_bench.benchmark.config import MONTH
from retrieval_bench.compare.jobs import FinishedJob, find_job_dirs, is_finished
from retrieval_bench.errors import BenchError
from retrieval_bench.io import atomic_write_json

STATE_FILE = "benchmark.json"
RUNNING, FINISHED = "running", "finished"


class BenchmarkError(BenchError):
    """The benchmark cannot go on; the message says what to do."""


def fingerprint(plan: Mapping[str, Any]) -> str:
    text = json.dumps(plan, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def read_state(month_dir: Path) -> dict[str, Any] | None:
    try:
        return json.loads((month_dir / STATE_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise BenchmarkError(f"{month_dir / STATE_FILE}: unreadable: {exc}") from None


def write_state(month_dir: Path, state: Mapping[str, Any]) -> None:
    atomic_write_json(month_dir / STATE_FILE, dict(state))


def is_finished_month(month_dir: Path) -> bool:
    state = read_state(month_dir) if month_dir.is_dir() else None
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


def planned_done(jobs: Iterable[FinishedJob]) -> set[tuple[str, str]]:
    """(dataset option, retriever option) pairs of a month's finished jobs (`month_jobs`)."""
    done = set()
    for job in jobs:
        dataset = job.choices.get("dataset")
        retriever = job.choices.get("retriever")
        if dataset and retriever:
            done.add((dataset, retriever))
    return done


def resolve_baseline(root: Path, month: str, baseline: str) -> Path | None:
    """The month folder to gate against, or None when there is none yet."""
    if baseline in ("", "previous"):
        earlier = [p for p in finished_months(root) if p.name < month]
        return earlier[-1] if earlier else None
    if MONTH.fullmatch(baseline):
        path = root / baseline
        if baseline == month:
            raise BenchmarkError(f"benchmark.baseline={baseline} is the month being run")
        if not is_finished_month(path):
            raise BenchmarkError(
                f"benchmark.baseline={baseline}: {path} is not a finished benchmark month"
            )
        return path
    path = Path(baseline).expanduser()
    if not path.is_dir() or not find_job_dirs(path):
        raise BenchmarkError(f"benchmark.baseline={baseline}: no job folders there")
    return path


@contextlib.contextmanager
def month_lock(month_dir: Path) -> Iterator[None]:
    """One benchmark run per month folder at a time (a second one fails at once)."""
    month_dir.mkdir(parents=True, exist_ok=True)
    with (month_dir / ".lock").open("a+b") as fh:
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
