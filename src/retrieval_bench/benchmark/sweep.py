"""A benchmark month's sweep process: started in a process group of its own, stopped with the
driver, and found again by a rerun if it outlived the driver.

The driver (`driver._launch`) runs each dataset's jobs as `python -m run -m ...`. Without care a
driver killed while that sweep runs (SIGKILL, or SIGTERM before it could react) leaves the
sweep running on its own with the month's lock gone, and a rerun of the month would start the
same jobs into the same folders at the same time. So:

* the sweep gets a process group (and session) of its own, which holds it and every process it
  starts (a launcher's workers): one `killpg` stops them all;
* the driver passes its pid in `PARENT_PID_ENV`; the sweep asks Linux to send it SIGTERM when
  the driver dies (`run.exits.die_with_parent`), and handles SIGTERM as Ctrl-C (its jobs are
  marked interrupted);
* a driver stopped by Ctrl-C or SIGTERM passes the signal on to the sweep's group, waits
  `STOP_WAIT_S` for its jobs to mark themselves, then kills what is left;
* the driver records the sweep's group in the month's `benchmark.json`; a rerun that finds a
  process of a recorded group still alive refuses to start, naming the pids (`live_sweeps`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from retrieval_bench.errors import stop_signal

# The environment variable a sweep reads its driver's pid from (run.exits.die_with_parent).
PARENT_PID_ENV = "RETRIEVAL_BENCH_PARENT_PID"
# How long a stopped sweep may take to mark its jobs before its group is killed.
STOP_WAIT_S = 30.0


def start_time(pid: int) -> str | None:
    """When process `pid` started (clock ticks since boot, /proc/<pid>/stat field 22), to tell
    it from a later process given the same pid; None when it is gone or this is not Linux."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[19]


def group_members(pgid: int) -> list[int]:
    """The live processes of process group `pgid`, found in /proc (zombies left out); where
    there is no /proc, [pgid] when `killpg(pgid, 0)` says the group exists."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return []
        return [pgid]
    members = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = (entry / "stat").read_text(encoding="ascii", errors="replace")
            state, _ppid, group = fields.rpartition(")")[2].split()[:3]
            if int(group) == pgid and state != "Z":
                members.append(int(entry.name))
    return sorted(members)


def sweep_record(proc: subprocess.Popen[Any]) -> dict[str, Any]:
    """What benchmark.json keeps of a started sweep, for `live_sweeps`."""
    return {"pgid": proc.pid, "started": start_time(proc.pid)}


def live_sweeps(records: Iterable[Mapping[str, Any]]) -> list[int]:
    """The pids still alive of the sweeps `records` name (benchmark.json's `sweep` entries). A
    group whose leader lives on with another start time is another process that was given the
    pid later: not the sweep."""
    alive: list[int] = []
    for record in records:
        pgid = record.get("pgid")
        if not isinstance(pgid, int):
            continue
        leader_started = start_time(pgid)
        if leader_started is not None and leader_started != record.get("started"):
            continue
        alive += group_members(pgid)
    return sorted(set(alive))


def run_sweep(cmd: Sequence[str], started: Any) -> int:
    """Run `cmd` (a sweep) in a process group of its own and return its exit code; `started`
    is called with the process first (to record it). If the driver is interrupted (Ctrl-C,
    SIGTERM) the sweep's group gets the same signal, `STOP_WAIT_S` to stop, then SIGKILL."""
    env = {**os.environ, PARENT_PID_ENV: str(os.getpid())}
    proc = subprocess.Popen(list(cmd), env=env, start_new_session=True)
    try:
        started(proc)
        return proc.wait()
    except BaseException as exc:
        stop_group(proc, stop_signal(exc) if isinstance(exc, KeyboardInterrupt) else signal.SIGTERM)
        raise


def stop_group(proc: subprocess.Popen[Any], signum: int) -> None:
    """Send `signum` to `proc`'s process group, wait for `proc` up to `STOP_WAIT_S`, then kill
    whatever of the group is left (also when the wait itself is interrupted)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signum)
    try:
        proc.wait(timeout=STOP_WAIT_S)
    except BaseException:
        pass
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(BaseException):
            proc.wait(timeout=STOP_WAIT_S)
