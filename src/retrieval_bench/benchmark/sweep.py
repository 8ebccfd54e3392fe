"""A benchmark month's sweep processes as the month's state records them, and found again by a
rerun if they outlived the driver that started them.

The app starts each dataset's sweep in a process group of its own (`run.sweep_process`, which
says why) and records the group here (`sweep_record`, in the month's `benchmark.json`); a rerun
that finds a process of a recorded group still alive refuses to start, naming the pids
(`live_sweeps`, `benchmark.month.refuse_live_sweeps`): a second sweep would run the same jobs
into the same folders at the same time.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any


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
