"""A benchmark month's sweep as a process: started in a process group of its own, stopped with the
driver.

The monthly driver (`run.monthly`) runs each dataset's jobs as `python -m run -m ...`. Without
care a driver killed while that sweep runs (SIGKILL, or SIGTERM before it could react) leaves the
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
  process of a recorded group still alive refuses to start, naming the pids
  (`retrieval_bench.benchmark.sweep.live_sweeps`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable, Sequence
from typing import Any

from retrieval_bench.errors import stop_signal

# The environment variable a sweep reads its driver's pid from (run.exits.die_with_parent).
PARENT_PID_ENV = "RETRIEVAL_BENCH_PARENT_PID"
# How long a stopped sweep may take to mark its jobs before its group is killed.
STOP_WAIT_S = 30.0


def run_sweep(cmd: Sequence[str], started: Callable[[subprocess.Popen[Any]], None]) -> int:
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
