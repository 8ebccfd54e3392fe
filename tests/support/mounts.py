"""Real file systems that refuse writes, for the environment-fault tests: a read-only tmpfs and a
tiny one that fills up. The tests run as root in CI, and root ignores permission bits, so a
chmod'ed folder proves nothing there; a mount does. Mounting needs CAP_SYS_ADMIN: where it is
not permitted (an unprivileged container) the test is skipped, saying so."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def tmpfs(where: Path, options: str) -> Iterator[Path]:
    """A tmpfs mounted at `where` with `options` (`ro`, `size=64k`), unmounted afterwards;
    skips the test where mounting is not permitted."""
    mount = shutil.which("mount")
    if mount is None:
        pytest.skip("no mount command here: a real read-only or full file system cannot be made")
    where.mkdir(parents=True, exist_ok=True)
    made = subprocess.run(
        [mount, "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if made.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here ({made.stderr.strip()})")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, check=False)


def read_only(where: Path) -> contextlib.AbstractContextManager[Path]:
    """An empty read-only file system at `where`."""
    return tmpfs(where, "ro,size=1m")


def nearly_full(where: Path, size: str = "64k") -> contextlib.AbstractContextManager[Path]:
    """A file system of `size` at `where`: the first larger write fails with ENOSPC."""
    return tmpfs(where, f"size={size}")
