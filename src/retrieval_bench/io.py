"""Atomic file writes: a reader (or a crash) never sees a half-written output; content keys."""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

log = logging.getLogger(__name__)


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """A handle on a temp file beside `path`; fsynced and renamed into place on success,
    removed on failure, so `path` only ever holds a whole file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


LOCK_QUIET_WAIT_S = 1.0
"""How long a wait for a lock stays silent before it says what it waits for."""


@contextlib.contextmanager
def file_lock(lock_path: Path, what: str = "") -> Iterator[None]:
    """Exclusive advisory lock held across processes; released when the file is closed.

    A wait longer than `LOCK_QUIET_WAIT_S` is logged, naming `what` is waited for and the lock
    file, so a job blocked behind another job's cache write never sits there silently.
    The lock file is left in place: deleting it would let two jobs lock different inodes.
    """
    with lock_path.open("a+b") as fh:
        if not _try_lock(fh.fileno(), LOCK_QUIET_WAIT_S):
            log.info("waiting for %s (lock held by another job: %s)", what or "a lock", lock_path)
            start = time.monotonic()
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            log.info("got %s after %.1f s", what or "the lock", time.monotonic() - start)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _try_lock(fd: int, patience_s: float) -> bool:
    """Take the lock without blocking, retrying for `patience_s`; False if still held."""
    deadline = time.monotonic() + patience_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    with atomic_writer(path) as handle:
        handle.write(data)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike[str], obj: Any, indent: int | None = 2) -> None:
    """`indent=None` writes one compact line with the C encoder, several times faster for the
    large per-query files (metrics.json) than the indented pure-Python path."""
    text = json.dumps(obj, ensure_ascii=False, indent=indent)
    atomic_write_text(path, text + "\n")


def jsonl_text(records: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def update_len_prefixed(digest: Any, data: bytes) -> None:
    """Feed `data` to a hashlib digest after its 8-byte length, so concatenations cannot collide."""
    digest.update(len(data).to_bytes(8, "little"))
    digest.update(data)


def update_texts(digest: Any, texts: Sequence[str]) -> None:
    """Feed a list of texts to a digest: their count, then each one's UTF-8 length-prefixed
    (`["ab", "c"]` and `["a", "bc"]` differ). The content key of the on-disk caches."""
    digest.update(len(texts).to_bytes(8, "little"))
    for text in texts:
        update_len_prefixed(digest, text.encode("utf-8", errors="surrogatepass"))
