"""Errors a user can act on: each names the file, line or config key at fault; the exit codes."""

from __future__ import annotations

import contextlib
import difflib
import errno
import signal
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path


def nearest_hint(name: str, known: Sequence[str], prefix: str = "", suffix: str = "") -> str:
    """For an unknown key or field: `did you mean '<prefix><nearest><suffix>'?`, or the known
    names when none is close, so a typo is answered with its fix."""
    nearest = difflib.get_close_matches(name, list(known), n=1)
    if nearest:
        return f"did you mean '{prefix}{nearest[0]}{suffix}'?"
    return f"known: {', '.join(known)}"


class BenchError(Exception):
    """Base class for errors that are reported to the user without a traceback."""


class DataError(BenchError):
    """A dataset file is malformed or inconsistent."""

    def __init__(self, path: object, message: str, line: int | None = None) -> None:
        where = f"{path}:{line}" if line is not None else f"{path}"
        super().__init__(f"{where}: {message}")
        self.path = path
        self.line = line


class ConfigError(BenchError):
    """A config value is out of range or inconsistent; names the key."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"config key '{key}': {message}")
        self.key = key
        self.message = message


def bench_cause(exc: BaseException) -> BenchError | None:
    """The first BenchError among the exceptions `exc` was raised from (a config resolver's
    refusal inside OmegaConf's own error), else None."""
    seen: set[int] = set()
    cause = exc.__cause__ or exc.__context__
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, BenchError):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None


class EncoderUnavailable(BenchError):
    """An encoder model cannot be loaded (not on disk, no network)."""


# Exit codes of every command-line tool (`python -m run`, `run.score`, `run.compare`, ...);
# each one's docstring is its line in the docs' exit-code reference.
EXIT_OK = 0
"""Done: everything asked was done and written."""
EXIT_REGRESSION = 1
"""Only the monthly gate: a significant drop beyond its tolerance."""
EXIT_BAD_INPUT = 2
"""Bad input or config (Hydra's own override errors included), or the machine refused a file
operation: one line naming the file:line, key or flag at fault."""
EXIT_INTERNAL = 3
"""An unexpected exception, this project's bug: one line naming the file its traceback went
to."""
EXIT_TOKEN_DIFFERENCE = 4
"""Only `run.tokens parity`: the fast cut differs from jieba's."""
EXIT_INTERRUPTED = 130
"""Ctrl-C (128 + SIGINT), as shells report it; unfinished job folders say so."""
EXIT_TERMINATED = 143
"""SIGTERM (128 + 15), handled as Ctrl-C is."""
EXIT_BROKEN_PIPE = 141
"""128 + SIGPIPE: whoever read the output stopped (`| head`), as `ls` exits."""


class NothingScored(BenchError):
    """Every stage scored 0 queries: the job's outputs are written, but it measured nothing."""


class NothingUsable(BenchError):
    """An arm's outside input gives it nothing to rank (an empty run file, a run of another
    evaluation set or corpus, a service answering only ids the corpus lacks): its rankings
    would all be empty and score 0, so the job stops naming what the arm lacked (exit 2), as a
    job that scored nothing does, instead of reporting zeros with a warning."""


# The errnos of a file operation the machine refused, with what happened and what to do: the
# state of the machine (a read-only mount, a full disk, a quota, permissions), neither a bad
# value the user gave nor this project's bug.
_ENVIRONMENT = {
    errno.EROFS: ("the file system is read-only", "point {where} to a writable folder"),
    errno.ENOSPC: (
        "no space left on the device",
        "free space there, or point {where} to another disk",
    ),
    errno.EDQUOT: ("disk quota exceeded", "free space there, or point {where} elsewhere"),
    errno.EACCES: ("permission denied", "give this user access, or point {where} elsewhere"),
    errno.EPERM: ("operation not permitted", "give this user access, or point {where} elsewhere"),
}


class EnvironmentFault(BenchError):
    """The machine refused a file operation (module constant `_ENVIRONMENT`): one line naming
    the path, what happened and what to do (exit 2), not an internal error."""

    def __init__(self, path: object, code: int, where: str = "the output") -> None:
        reason, advice = _ENVIRONMENT[code]
        super().__init__(f"{path}: {reason}; {advice.format(where=where)}")
        self.path = path
        self.code = code

    def naming(self, keys: Mapping[Path, str]) -> EnvironmentFault:
        """The same fault, its advice naming the setting whose folder holds the path (`keys`:
        folder -> config key or flag, e.g. the job folder -> `hydra.run.dir`)."""
        path = Path(str(self.path)).absolute()
        for folder, key in keys.items():
            if path == folder or folder in path.parents:
                return EnvironmentFault(self.path, self.code, key)
        return self


def environment_fault(exc: BaseException) -> EnvironmentFault | None:
    """`exc` (or the OSError it was raised from) as an EnvironmentFault when the machine refused
    a file operation (a read-only or full file system, a quota, permissions), else None."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, EnvironmentFault):
            return current
        if isinstance(current, OSError) and current.errno in _ENVIRONMENT:
            path = current.filename if current.filename is not None else "(a file)"
            return EnvironmentFault(path, current.errno)
        current = current.__cause__ or current.__context__
    return None


class InternalError(Exception):
    """An unexpected exception, its traceback already written to `log_path`."""

    def __init__(self, cause: BaseException, log_path: object) -> None:
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.log_path = log_path


class Terminated(KeyboardInterrupt):
    """SIGTERM (a `kill`, a scheduler's stop, a benchmark driver that died), raised by the
    handler the command-line tools install (`run.exits.stop_signals`) so that it is handled as
    Ctrl-C is: unfinished job folders say so, one line says what was left, exit 143."""

    signum = signal.SIGTERM


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM: `signum`), with what it left unfinished (innermost
    `interrupt_leaves` wins)."""

    def __init__(self, unfinished: str, signum: int = signal.SIGINT) -> None:
        super().__init__(unfinished)
        self.unfinished = unfinished
        self.signum = signum


def stop_signal(exc: BaseException) -> int:
    """The signal a KeyboardInterrupt stands for: SIGTERM for `Terminated` (and what it left
    unfinished), else SIGINT."""
    return int(getattr(exc, "signum", signal.SIGINT))


def stopped_how(exc: BaseException) -> str:
    """How a KeyboardInterrupt stopped the work, for the one line and the UNFINISHED marker:
    `interrupted` (Ctrl-C) or `terminated (SIGTERM)`."""
    signum = stop_signal(exc)
    if signum == signal.SIGINT:
        return "interrupted"
    return f"terminated ({signal.Signals(signum).name})"


@contextlib.contextmanager
def interrupt_leaves(unfinished: str) -> Iterator[None]:
    """Turn a KeyboardInterrupt inside the block into `Interrupted(unfinished)`, so the one line
    printed on Ctrl-C can say what was left undone."""
    try:
        yield
    except Interrupted:
        raise
    except KeyboardInterrupt as exc:
        raise Interrupted(unfinished, stop_signal(exc)) from None
