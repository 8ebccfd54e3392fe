"""The `UNFINISHED` marker of a job folder: written, read, and judged against the living.

A job writes the marker when it starts (`running`), rewrites it when it stops early
(`interrupted`, `failed: ...`) and removes it after its last file. One line:

    <state> (<ISO time>, pid <pid> on <host>)

A job killed outright (SIGKILL, the machine's OOM killer, a node lost) never rewrites it, so a
marker saying `running` may outlive its process. Read on the host that wrote it, a `running`
marker whose process is gone says `interrupted (process N is gone)`; a marker from another host
(a SLURM node), or written before the host was recorded, is reported as it stands, since a
local pid says nothing about it. A pid the system has since given to another process still
reads as running: the check cannot tell the two apart.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import socket
from pathlib import Path

from retrieval_bench.io.atomic import atomic_write_text
from retrieval_bench.jobdir.names import UNFINISHED

RUNNING = "running"
INTERRUPTED = "interrupted"
# The trailing "(time, pid N[ on host])" of a marker line; the state before it may hold
# parentheses of its own (`failed: internal error X (see <log>)`).
_WRITER = re.compile(r"\((?P<when>[^()]*), pid (?P<pid>\d+)(?: on (?P<host>[^()\s]+))?\)\s*$")


def mark_unfinished(job_dir: str | Path, state: str) -> None:
    """Say in the job folder that its outputs are not (yet) complete, and why: written when a
    job starts and rewritten when it fails or is interrupted; `clear` removes it last."""
    when = dt.datetime.now().isoformat(timespec="seconds")
    line = f"{state} ({when}, pid {os.getpid()} on {socket.gethostname()})\n"
    atomic_write_text(Path(job_dir) / UNFINISHED, line)


def clear(job_dir: Path) -> None:
    """The job's last file is written: it is finished."""
    (job_dir / UNFINISHED).unlink(missing_ok=True)


def is_marked(job_dir: Path) -> bool:
    return (job_dir / UNFINISHED).is_file()


def marker_state(job_dir: Path) -> str | None:
    """What the marker says, judged (module docstring); None when there is no marker."""
    marker = job_dir / UNFINISHED
    try:
        said = marker.read_text(encoding="utf-8").strip().splitlines()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        return f"marker unreadable: {getattr(exc, 'strerror', None) or exc}"
    if not said:
        return "marker is empty"
    return judged(said[0])


def judged(line: str) -> str:
    """A marker line as it should be read now: a `running` line written on this host by a
    process that no longer exists reads `interrupted (process N is gone)`."""
    found = _WRITER.search(line)
    if found is None or not line.startswith(f"{RUNNING} ("):
        return line
    host, pid = found["host"], int(found["pid"])
    if host is None or host != socket.gethostname() or process_exists(pid):
        return line
    return f"{INTERRUPTED} (process {pid} is gone)"


def process_exists(pid: int) -> bool:
    """Whether a process `pid` runs on this host (owned by anyone). A zombie (killed, not yet
    reaped by its parent, e.g. a launcher's worker pool) has stopped running: not counted."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, owned by another user
        pass
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:  # no /proc (not Linux), or it just ended: trust kill's answer
        return True
    # "pid (comm) state ...": comm may hold spaces and parentheses; the state follows the last.
    return stat.rpartition(")")[2].split()[:1] not in (["Z"], ["X"])
