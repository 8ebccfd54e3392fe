"""Atomic file writes: a reader (or a crash) never sees a half-written output; content keys.

Every file written here gets the mode an ordinary `open()` would give it (0666 less the umask),
so colleagues on a shared server can read reports when the umask lets them.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import math
import os
import pickle
import re
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from retrieval_bench.errors import ConfigError

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
            # mkstemp makes 0600; give the file what open() would have.
            os.fchmod(handle.fileno(), 0o666 & ~current_umask())
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
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


# atomic_writer's temp names: "." + target name + "." + mkstemp's 8 random characters + ".tmp".
_TEMP_NAME = re.compile(r"^\.(?P<target>.+)\.[a-z0-9_]{8}\.tmp$")


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
        match = _TEMP_NAME.match(tmp.name)
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


def writable_dir(path: Path, key: str, subdirs: Sequence[str] = ()) -> Path:
    """`path` (and any of `subdirs` it already holds), created if missing, checked by writing a
    file there (permission bits alone miss read-only mounts and ACLs); a ConfigError naming
    `key` otherwise, before any work is done."""
    for folder in (path, *(path / sub for sub in subdirs if (path / sub).exists())):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=folder):
                pass
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise ConfigError(key, f"{folder}: cannot write there ({reason})") from None
    return path


def output_dir_problem(path: str | os.PathLike[str]) -> str:
    """Why `path` cannot be (or become) a folder: it, or the nearest of its parents that
    exists, is a regular file (or another non-folder); '' when nothing stands in the way. A
    check before any work, so an output path mistyped onto a file is the user's error named by
    its key, not an internal error when the first file is written."""
    path = Path(path)
    for candidate in (path, *path.parents):
        try:
            exists = candidate.exists()
        except OSError:
            continue  # not searchable (a permission): the writer says so when it tries
        if not exists:
            continue
        if candidate.is_dir():
            return ""
        if candidate == path:
            return f"{path} is a file, not a folder"
        return f"{path} cannot be a folder: {candidate} is a file, not a folder"
    return ""


def check_output_dir(path: str | os.PathLike[str], key: str) -> None:
    """ConfigError naming `key` (a config key or a command-line flag) when `path` cannot be a
    folder (`output_dir_problem`)."""
    problem = output_dir_problem(path)
    if problem:
        raise ConfigError(key, problem)


_claimed: list[Path] = []
"""Folders this process created through `claim_new_dir` (and the parents it made for them)."""


def claim_new_dir(base: str) -> str:
    """Create a folder that no other process has: `base` itself, else `base-2`, `base-3`, ...

    `os.mkdir` fails when the folder exists, so two jobs started in the same second (whose
    timestamped names are equal) never share a folder. Used as the `${new_dir:...}` resolver
    of conf/config.yaml (cached by OmegaConf, so a job's folder is claimed once). Hydra also
    resolves the value while it merges an override of it (experiment=monthly sets its own
    run dir), so a claim may go unused: `release_unused_claims` removes those at exit."""
    parent = Path(base).parent
    missing = [p for p in (parent, *parent.parents) if not p.exists()]
    parent.mkdir(parents=True, exist_ok=True)
    _claimed.extend(reversed(missing))
    candidate, n = base, 1
    while True:
        try:
            os.mkdir(candidate)
        except FileExistsError:
            n += 1
            candidate = f"{base}-{n}"
            continue
        _claimed.append(Path(candidate))
        return candidate


def release_unused_claims() -> None:
    """Remove the folders `claim_new_dir` created that nothing was written into, deepest
    first; `rmdir` refuses a folder that holds anything, so a used one is never touched."""
    while _claimed:
        with contextlib.suppress(OSError):
            _claimed.pop().rmdir()


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


def strict_dumps(obj: Any, **kwargs: Any) -> str:
    """`json.dumps(obj, ensure_ascii=False, **kwargs)` as strict JSON: a non-finite float (a
    NaN in a config, a mean over no query) is written as null (`strict_json`), never as the bare
    `NaN` / `Infinity` Python's encoder writes by default and other parsers refuse. The common
    case, nothing to replace, costs one encoding."""
    try:
        return json.dumps(obj, ensure_ascii=False, allow_nan=False, **kwargs)
    except ValueError:
        return json.dumps(strict_json(obj), ensure_ascii=False, allow_nan=False, **kwargs)


def atomic_write_json(path: str | os.PathLike[str], obj: Any, indent: int | None = 2) -> None:
    """`indent=None` writes one compact line with the C encoder, several times faster for the
    large per-query files (metrics.json) than the indented pure-Python path. Always strict
    JSON (`strict_dumps`)."""
    atomic_write_text(path, strict_dumps(obj, indent=indent) + "\n")


def jsonl_text(records: list[dict[str, Any]]) -> str:
    return "".join(strict_dumps(r) + "\n" for r in records)


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


def json_number(value: float) -> float | None:
    """`value`, or None where JSON has no number for it (infinite, NaN)."""
    return float(value) if math.isfinite(value) else None


def strict_json(value: Any) -> Any:
    """`value` with every non-finite float (a mean over no query) as null: JSON has no NaN or
    Infinity, and other tools' parsers refuse them. Infinite CI ends say why beside them
    (`ci_unbounded`, written by the tests themselves)."""
    if isinstance(value, float):
        return json_number(value)
    if isinstance(value, dict):
        return {k: strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(v) for v in value]
    return value


_Built = TypeVar("_Built")


def user_cache_dir() -> Path:
    """This project's folder in the user's cache (`$XDG_CACHE_HOME`, else ~/.cache), beside the
    other model caches of the machine: where values every process would otherwise rebuild on
    start are kept (`stored_or_built`). Deleting it only costs the rebuild."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "retrieval-bench"


def stored_or_built(
    path: Path, build: Callable[[], _Built], accept: Callable[[Any], bool]
) -> _Built:
    """The value pickled at `path` where it unpickles and `accept` takes it, else `build()`,
    then stored there atomically for the next process. `path` must name everything the value
    depends on (a package version, a hash of its input file): what is read is not rebuilt. A
    file that does not unpickle (partial, foreign) is replaced; a folder that cannot be written
    only loses the saving."""
    try:
        stored = pickle.loads(path.read_bytes())
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError):
        stored = None
    if stored is not None and accept(stored):
        return stored  # type: ignore[no-any-return]
    built = build()
    try:
        atomic_write_bytes(path, pickle.dumps(built, protocol=pickle.HIGHEST_PROTOCOL))
    except OSError as exc:
        log.debug("%s not stored: %s", path, exc)
    return built
