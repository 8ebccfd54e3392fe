"""The UNFINISHED marker (`retrieval_bench.jobdir.marker`): a `running` marker whose process is
gone reads as interrupted, on the host that wrote it only; everything else reads as written.
(Before: a job killed by SIGKILL stayed "running (..., pid N)" forever.)"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from retrieval_bench.benchmark.history import job_folder_state
from retrieval_bench.jobdir import names
from retrieval_bench.jobdir.marker import mark_unfinished, marker_state, process_exists
from retrieval_bench.jobdir.read import scan_jobs

HOST = socket.gethostname()


@pytest.fixture
def gone_pid() -> int:
    """The pid of a process that ran on this host and has ended (and been reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.fixture
def zombie_pid() -> Iterator[int]:
    """A process killed but not yet reaped by its parent (this test): gone, though its pid
    still answers a signal."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    os.kill(proc.pid, signal.SIGKILL)
    os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # dead, left unreaped
    yield proc.pid
    proc.wait()


def _marked(folder: Path, line: str) -> Path:
    folder.mkdir(parents=True)
    (folder / names.UNFINISHED).write_text(line + "\n", encoding="utf-8")
    return folder


def test_a_job_marks_its_pid_and_host_and_reads_running_while_it_lives(tmp_path: Path) -> None:
    mark_unfinished(tmp_path, "running")
    line = (tmp_path / names.UNFINISHED).read_text(encoding="utf-8")
    assert line.startswith("running (") and line.endswith(f", pid {os.getpid()} on {HOST})\n")
    assert marker_state(tmp_path) == line.strip()


def test_a_running_marker_whose_process_is_gone_reads_interrupted(
    tmp_path: Path, gone_pid: int
) -> None:
    job = _marked(tmp_path / "0-a", f"running (2026-12-01T10:00:00, pid {gone_pid} on {HOST})")
    assert not process_exists(gone_pid)
    assert marker_state(job) == f"interrupted (process {gone_pid} is gone)"
    assert scan_jobs([tmp_path]).skipped_lines() == [
        f"skipped {job}: unfinished: interrupted (process {gone_pid} is gone)"
    ]
    # The monthly driver names the job so when it did not finish.
    assert job_folder_state(job) == f"unfinished: interrupted (process {gone_pid} is gone)"


def test_a_killed_but_unreaped_process_is_gone(tmp_path: Path, zombie_pid: int) -> None:
    job = _marked(tmp_path / "job", f"running (2026-12-01T10:00:00, pid {zombie_pid} on {HOST})")
    assert marker_state(job) == f"interrupted (process {zombie_pid} is gone)"


@pytest.mark.parametrize(
    "line",
    [
        # another host: a local pid says nothing about it
        "running (2026-12-01T10:00:00, pid {pid} on node-that-is-not-this-one)",
        # written before markers recorded their host
        "running (2026-12-01T10:00:00, pid {pid})",
        # states a job wrote itself as it stopped are already what happened
        "interrupted (2026-12-01T10:00:00, pid {pid} on {host})",
        "failed: internal error RuntimeError (see /x/__main__.log) (2026-12-01T10:00:00, pid "
        "{pid} on {host})",
    ],
)
def test_other_markers_read_as_written(tmp_path: Path, gone_pid: int, line: str) -> None:
    text = line.format(pid=gone_pid, host=HOST)
    assert marker_state(_marked(tmp_path / "job", text)) == text


def test_no_marker_and_a_never_started_job(tmp_path: Path) -> None:
    assert marker_state(tmp_path) is None
    assert job_folder_state(tmp_path / "absent") == "no job folder"
