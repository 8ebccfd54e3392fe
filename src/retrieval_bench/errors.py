"""Errors a user can act on: each names the file, line or config key at fault."""

import difflib
from collections.abc import Sequence


def nearest_hint(name: str, known: Sequence[str], prefix: str = "") -> str:
    """For an unknown key or field: `did you mean '<prefix><nearest>'?`, or the known names
    when none is close, so a typo is answered with its fix."""
    nearest = difflib.get_close_matches(name, list(known), n=1)
    if nearest:
        return f"did you mean '{prefix}{nearest[0]}'?"
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


class EncoderUnavailable(BenchError):
    """An encoder model cannot be loaded (not on disk, no network)."""
