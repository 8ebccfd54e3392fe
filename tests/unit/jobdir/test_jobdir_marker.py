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


# A process name (/proc/<pid>/stat's comm, 15 bytes) that reads like a zombie's state to a
# parser that splits at the first ")": "pid (x) Z (y) S ...".
ODD_NAME = "x) Z (y"


@pytest.fixture
def odd_named_pid() -> Iterator[int]:
    """A live process that named itself ODD_NAME (prctl PR_SET_NAME), as any program may."""
    code = (
        "import ctypes, sys, time; "
        f"ctypes.CDLL(None).prctl(15, {ODD_NAME.encode()!r}, 0, 0, 0); "
        "print('named', flush=True); time.sleep(60)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "named\n"
    yield proc.pid
    proc.kill()
    proc.wait()


def test_a_process_whose_name_holds_a_parenthesis_is_alive(
    tmp_path: Path, odd_named_pid: int
) -> None:
    stat = Path(f"/proc/{odd_named_pid}/stat").read_text(encoding="ascii")
    assert f"({ODD_NAME})" in stat  # the name is what the parser must read past
    assert process_exists(odd_named_pid)
    line = f"running (2026-09-01T10:00:00, pid {odd_named_pid} on {HOST})"
    assert marker_state(_marked(tmp_path / "job", line)) == line


def test_a_process_of_another_user_is_alive() -> None:
    """Signalling another user's process fails with EPERM: it exists. Checked from a process
    that is not its owner: as root, a child that drops to `nobody` looks at this process;
    otherwise this process looks at pid 1 (root's)."""
    if os.geteuid() != 0:
        assert os.stat("/proc/1").st_uid != os.geteuid()
        assert process_exists(1)
        return
    # Everything imported before dropping to nobody, who may not read the interpreter's files.
    code = (
        "import encodings.ascii, os, sys; from retrieval_bench.jobdir.marker import "
        "process_exists; os.setgid(65534); os.setuid(65534); "
        "print(process_exists(int(sys.argv[1])))"
    )
    checked = subprocess.run(
        [sys.executable, "-c", code, str(os.getpid())], capture_output=True, text=True, check=True
    )
    assert checked.stdout.strip() == "True", checked.stderr
