"""Atomic file writes: a reader (or a crash) never sees a half-written output.

Every file written here gets the mode an ordinary `open()` would give it (0666 less the umask),
so colleagues on a shared server can read reports when the umask lets them. A temp file is named
`TEMP_NAME`'s way beside its target, so a cache can tell its own killed writers' leftovers
(`locks.remove_stale_temps`).
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from retrieval_bench.io.strict_json import strict_dumps


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """A handle on a temp file beside `path`; fsynced and renamed into place on success,
    removed on failure, so `path` only ever holds a whole file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        exc.filename = str(path)  # the file meant, not the temp name it never got
        raise
    try:
        with os.fdopen(fd, "wb") as handle:
            # mkstemp makes 0600; give the file what open() would have.
            os.fchmod(handle.fileno(), 0o666 & ~current_umask())
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.filename is None:
            exc.filename = str(path)  # a full disk fails a write, which names no file
        raise


def current_umask() -> int:
    """The process umask, read without changing it where /proc allows (os.umask can only be
    read by setting it, which races with other threads creating files)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    with atomic_writer(path) as handle:
        handle.write(data)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike[str], obj: Any, indent: int | None = 2) -> None:
    """`indent=None` writes one compact line with the C encoder, several times faster for the
    large per-query files (metrics.json) than the indented pure-Python path. Always strict
    JSON (`strict_dumps`)."""
    atomic_write_text(path, strict_dumps(obj, indent=indent) + "\n")


# atomic_writer's temp names: "." + target name + "." + mkstemp's 8 random characters + ".tmp".
TEMP_NAME = re.compile(r"^\.(?P<target>.+)\.[a-z0-9_]{8}\.tmp$")
