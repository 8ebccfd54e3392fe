"""One exit code per outcome, for every command-line tool of this package.

0 ok; 1 a regression found by the monthly gate (and nothing else); 2 bad input or config,
Hydra's own override and composition errors included; 3 an internal error (one line on stderr,
the traceback in a file named on that line); 130 interrupted (Ctrl-C), with what was left
unfinished; 143 terminated (SIGTERM), handled as Ctrl-C is; 141 when whoever read the output
stopped reading (`python -m run.plugins | head`), silently, as a shell tool killed by SIGPIPE
exits. Errors never print a traceback on
the terminal unless HYDRA_FULL_ERROR=1.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import re
import signal
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

from hydra.errors import HydraException
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

from retrieval_bench.config import nearest_key
from retrieval_bench.config.renamed import rename_key
from retrieval_bench.errors import (
    EXIT_BAD_INPUT,
    EXIT_BROKEN_PIPE,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    BenchError,
    InternalError,
    Interrupted,
    Terminated,
    bench_cause,
    environment_fault,
    stop_signal,
    stopped_how,
)
from run.sweep_process import PARENT_PID_ENV


class JobFailed(BaseException):
    """Carries a single run's error past Hydra's `except Exception` (which would print an extra
    "Error executing job" line) to `guarded`, which reports `error` itself."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


def log_traceback(exc: BaseException) -> Path:
    """Write `exc`'s traceback to the log files of the running job (Hydra's `<job>.log`), or,
    outside a job, to a new file in the temp folder; returns where it went. Never to the
    terminal: the user sees one line naming this file."""
    exc_info = (type(exc), exc, exc.__traceback__)
    record = logging.LogRecord("run", logging.ERROR, __file__, 0, "internal error", None, exc_info)
    logged = []
    for handler in logging.getLogger().handlers:
        if (
            isinstance(handler, logging.FileHandler)
            and handler.baseFilename != os.devnull
            and handler.level <= logging.ERROR
        ):
            handler.handle(record)
            handler.flush()
            logged.append(Path(handler.baseFilename))
    if logged:
        return logged[0]
    fd, name = tempfile.mkstemp(prefix="retrieval-bench-", suffix=".traceback.txt")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    return Path(name)


def bad_input_message(exc: BaseException) -> str | None:
    """The one-line (or Hydra's few-line) message of an error that is the user's input, else
    None. Hydra's override/composition errors keep the OmegaConf cause they explain."""
    if isinstance(exc, BenchError):
        return str(exc)
    fault = environment_fault(exc)  # a read-only or full disk, a quota, permissions
    if fault is not None:
        return str(fault)
    if isinstance(exc, HydraException):
        hint = unknown_key_hint(exc)
        if hint is not None:
            return hint
        cause = exc.__cause__
        if isinstance(cause, OmegaConfBaseException) and str(cause) not in str(exc):
            return f"{exc}\n{cause}"
        return str(exc)
    if isinstance(exc, OmegaConfBaseException):  # e.g. a missing mandatory value (???)
        # A resolver's own refusal (`${required:...}`): its one line, not OmegaConf's wrapping.
        inner = bench_cause(exc)
        return str(inner) if inner is not None else str(exc)
    return None


def unknown_key_hint(exc: HydraException) -> str | None:
    """For an override of a key the typed config lacks (`service.retires=3`), the message every
    other unknown key gets (`config key 'service.retires': unknown key; did you mean
    'service.retries'?`) instead of Hydra's advice to append it with `+`, which would be refused
    too; None when the error is another, or no known key is close."""
    renamed = renamed_in_file(exc)
    if renamed is not None:
        return renamed
    key = _missing_key(exc.__cause__)
    if key is None:
        return None
    nearest = nearest_key(key)
    if nearest is None:
        return None
    return f"config key '{key}': unknown key; did you mean '{nearest}'?"


def _missing_key(cause: BaseException | None) -> str | None:
    """The dotted key an OmegaConf unknown-key error is about, else None."""
    key = getattr(cause, "full_key", None)
    if isinstance(cause, (ConfigKeyError, ConfigAttributeError)) and isinstance(key, str):
        return key
    return None


def renamed_in_file(exc: HydraException) -> str | None:
    """A config file's key of an old spelling (the command line's are rewritten before Hydra
    reads them, config.renamed; a file's are not): its new home and the file to write it in."""
    key = _missing_key(exc.__cause__ or exc.__context__)
    renamed = None if key is None else rename_key(key)
    if renamed is None:
        return None
    where = re.match(r"In '([^']+)'", str(exc))
    return (
        f"config key '{key}': renamed '{renamed}' in this release; an old spelling is read on "
        f"the command line only, so write '{renamed}' in "
        f"{where.group(1) + '.yaml' if where else 'the config file'} "
        "(docs/reference/renamed-keys.md)"
    )


def report(exc: BaseException, full_traceback: bool = False) -> int:
    """Print the one line for `exc` on stderr and return its exit code; an internal error's
    traceback goes to a file, and also to the terminal with `full_traceback`."""
    if isinstance(exc, KeyboardInterrupt):
        what = exc.unfinished if isinstance(exc, Interrupted) else "no file was left half-written"
        print(f"{stopped_how(exc)}; {what}", file=sys.stderr)
        signum = stop_signal(exc)
        return EXIT_INTERRUPTED if signum == signal.SIGINT else 128 + signum
    message = bad_input_message(exc)
    if message is not None:
        print(f"error: {message}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if isinstance(exc, InternalError):
        cause, where = exc.__cause__ or exc, exc.log_path
    else:
        cause, where = exc, log_traceback(exc)
    if full_traceback:
        traceback.print_exception(type(cause), cause, cause.__traceback__)
    print(
        f"internal error: {type(cause).__name__}: {cause} (traceback in {where}); please report it",
        file=sys.stderr,
    )
    return EXIT_INTERNAL


@contextlib.contextmanager
def stop_signals() -> Iterator[None]:
    """Within the block, SIGTERM raises `Terminated` (a KeyboardInterrupt), so a `kill` or a
    scheduler's stop is handled as Ctrl-C is: job folders marked, one line, exit 143, instead
    of Python's default (die at once, nothing said, UNFINISHED still saying "running").
    The first SIGTERM raises; later ones are noted and dropped until the block ends, so that
    the clean-up the first one started (rewriting a job's marker, stopping a sweep's group,
    bounded by its own waits) is not cut short: Linux sends a benchmark sweep its parent-death
    signal once per thread of the dying driver it is handed on through (`die_with_parent`),
    which is several SIGTERMs within milliseconds. SIGKILL still stops at once.
    Only the main thread may set a handler; elsewhere the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stopping(signum: int, frame: object) -> None:
        """Already stopping: nothing more to do (a handler, not SIG_IGN, which a process
        started during the clean-up would inherit)."""

    def terminate(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, stopping)
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def die_with_parent() -> None:
    """In a benchmark month's sweep process (the driver sets `PARENT_PID_ENV` to its pid):
    ask Linux to send this process SIGTERM when the driver dies, however it dies (SIGKILL
    included), so no sweep runs on without it; the variable is removed so that processes this
    one starts (a launcher's workers) do not read it. The driver may already be gone: then
    stop at once. Elsewhere than Linux a rerun of the month finds a sweep still running (its
    process group) and refuses, naming its pids."""
    expected = os.environ.pop(PARENT_PID_ENV, None)
    if not expected:
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    if str(os.getppid()) != expected:
        raise Terminated()


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def output_closed() -> int:
    """The reader of standard output went away: nothing is wrong with the command, so no error
    line. Standard output now goes nowhere, so that the interpreter's own flush at exit does not
    fail again (Python's documented way, "Note on SIGPIPE" in the signal module's docs)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_BROKEN_PIPE


def guarded(main: Callable[[], int], full_traceback: bool | None = None) -> int:
    """Run a command's `main`, mapping whatever escapes it to its exit code (SIGTERM handled
    as Ctrl-C is, `stop_signals`). `full_traceback` defaults to HYDRA_FULL_ERROR=1, the switch
    users of the Hydra app already know."""
    if full_traceback is None:
        full_traceback = os.environ.get("HYDRA_FULL_ERROR") == "1"
    try:
        with stop_signals():
            return main()
    except JobFailed as failed:
        return report(failed.error, full_traceback)
    except BrokenPipeError:
        return output_closed()
    except (Exception, KeyboardInterrupt) as exc:
        return report(exc, full_traceback)
