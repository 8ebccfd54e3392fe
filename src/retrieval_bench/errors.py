"""Errors a user can act on: each names the file, line or config key at fault; the exit codes."""

from __future__ import annotations

import contextlib
import difflib
from collections.abc import Iterator, Sequence


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


class EncoderUnavailable(BenchError):
    """An encoder model cannot be loaded (not on disk, no network)."""


# Exit codes of every command-line tool (`python -m run`, `run.score`, `run.compare`).
EXIT_OK = 0
EXIT_REGRESSION = 1  # only the monthly gate: a significant drop beyond its tolerance
EXIT_BAD_INPUT = 2  # bad input or config, Hydra's own override errors included
EXIT_INTERNAL = 3  # an unexpected exception: a bug, or the machine (disk full, ...)
EXIT_TOKEN_DIFFERENCE = 4  # only `run.tokens parity`: the fast cut differs from jieba's
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT), as shells report it


class NothingScored(BenchError):
    """Every stage scored 0 queries: the job's outputs are written, but it measured nothing."""


class InternalError(Exception):
    """An unexpected exception, its traceback already written to `log_path`."""

    def __init__(self, cause: BaseException, log_path: object) -> None:
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.log_path = log_path


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, with what it left unfinished (innermost `interrupt_leaves` wins)."""

    def __init__(self, unfinished: str) -> None:
        super().__init__(unfinished)
        self.unfinished = unfinished


@contextlib.contextmanager
def interrupt_leaves(unfinished: str) -> Iterator[None]:
    """Turn a KeyboardInterrupt inside the block into `Interrupted(unfinished)`, so the one line
    printed on Ctrl-C can say what was left undone."""
    try:
        yield
    except Interrupted:
        raise
    except KeyboardInterrupt:
        raise Interrupted(unfinished) from None
