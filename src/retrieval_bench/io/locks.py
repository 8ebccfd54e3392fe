"""Advisory file locks across processes, and the cleanup they make safe: a cache entry is written
under its lock, so a temp file whose lock is free was left by a writer that was killed."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import time
from collections.abc import Iterator
from pathlib import Path

from retrieval_bench.io.atomic import TEMP_NAME

log = logging.getLogger(__name__)


def lock_path_for(target: Path) -> Path:
    """The lock a cache entry is written under: `<key>.lock` beside `<key>.<ext>`."""
    return target.with_suffix(".lock")


def remove_stale_temps(root: Path, held_lock: Path | None = None) -> list[Path]:
    """Delete atomic_writer temp files under a cache `root` that no writer will finish.

    Cache entries are only written under their `lock_path_for` lock, so a temp file is stale
    (its writer was killed, e.g. by kill -9) exactly when its lock is free: `held_lock`, which
    the caller holds, or one that a non-blocking attempt can take. A temp file whose lock is
    held by a live writer is left alone. Returns the paths removed.
    """
    removed: list[Path] = []
    for tmp in sorted(root.rglob(".*.tmp")):
        match = TEMP_NAME.match(tmp.name)
        if match is None:
            continue
        lock = lock_path_for(tmp.parent / match["target"])
        if lock != held_lock and not _lock_is_free(lock):
            continue
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
            removed.append(tmp)
    if removed:
        log.info("removed %d stale temp file(s) under %s", len(removed), root)
    return removed


def _lock_is_free(lock: Path) -> bool:
    try:
        fh = lock.open("rb")
    except FileNotFoundError:
        return True  # no writer ever took it
    except OSError:
        return False
    with fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                return False
            raise
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        return True


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
