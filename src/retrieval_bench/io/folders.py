"""Output and cache folders checked before any work: a folder that cannot be created or written
is the user's error, named by its config key or flag, not an internal error at the first write;
and an output file that already holds something else, which a writer refuses to replace."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from retrieval_bench.errors import ConfigError


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


def holds_other_content(path: str | os.PathLike[str], content: str | bytes) -> bool:
    """Whether `path` exists holding something other than `content`: an output a writer must
    refuse to replace (an annotator's pool file, a label snapshot, an evaluation set given as
    the output of the command that reads it); writing the same content again is harmless."""
    path = Path(path)
    if not path.exists():
        return False
    data = content.encode("utf-8") if isinstance(content, str) else content
    try:
        return path.read_bytes() != data
    except IsADirectoryError:
        return True
