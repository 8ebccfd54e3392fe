"""A Hydra callback for `bench_tracking.py --phases`: where in a sweep the time goes.

Added to a sweep as `+hydra.callbacks.bench_phases._target_=phase_marks.PhaseMarks` (this
folder on PYTHONPATH), it appends one line per mark to the file `BENCH_PHASES` names: the
mark and the seconds since the sweep's process started (Linux's /proc, so the interpreter's
start-up and Hydra's composing count). The marks: the multirun's start, each job's start
and end, the multirun's end as this callback sees it (it is added last, and Hydra ends
callbacks in reverse order, so this is before the comparison is built and before the
tracking callback waits for its logger), and the interpreter's exit (atexit: after both).
"""

from __future__ import annotations

import atexit
import os
from typing import Any

from hydra.experimental.callback import Callback

PHASES_ENV = "BENCH_PHASES"


def seconds_since_start() -> float:
    """Seconds since this process started (clock ticks of /proc/self/stat against
    /proc/uptime; 10 ms resolution)."""
    ticks = os.sysconf("SC_CLK_TCK")
    with open("/proc/self/stat") as stat:
        started = int(stat.read().rpartition(")")[2].split()[19]) / ticks
    with open("/proc/uptime") as uptime:
        return float(uptime.read().split()[0]) - started


def mark(name: str) -> None:
    with open(os.environ[PHASES_ENV], "a") as out:
        out.write(f"{name} {seconds_since_start():.3f}\n")


class PhaseMarks(Callback):
    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        mark("multirun_start")
        atexit.register(mark, "exit")

    def on_job_start(self, config: Any, **kwargs: Any) -> None:
        mark("job_start")

    def on_job_end(self, config: Any, job_return: Any, **kwargs: Any) -> None:
        mark("job_end")

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        mark("multirun_end")


def phases(text: str, wall: float) -> dict[str, float]:
    """A sweep's phases in seconds from its marks (`text`, as `mark` wrote them) and its wall
    time: start (to the multirun's start: interpreter, imports, composing, the other callbacks'
    starts: the tracked sweep's starts its logger), the jobs (each
    from the end of the one before, so Hydra's work between jobs counts), the end (the
    comparison, and the tracked sweep's wait for its logger) and the exit (the interpreter's
    teardown, to the process's end)."""
    marks: dict[str, list[float]] = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        marks.setdefault(name, []).append(float(value))
    start = marks["multirun_start"][0]
    ends = [start, *marks["job_end"]]
    out = {"start": start}
    out.update({f"job {i}": ends[i] - ends[i - 1] for i in range(1, len(ends))})
    out["end"] = marks["exit"][0] - ends[-1]
    out["exit"] = wall - marks["exit"][0]
    return out
