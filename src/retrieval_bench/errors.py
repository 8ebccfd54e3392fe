"""Errors a user can act on: each names the file, line or config key at fault."""


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
