"""Atomic writes (`io.atomic`) give files and folders the mode the umask gives, as open() would."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from retrieval_bench.io.atomic import atomic_write_text


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664)])
def test_written_files_get_the_mode_the_umask_gives(tmp_path: Path, umask: int, mode: int) -> None:
    previous = os.umask(umask)
    try:
        atomic_write_text(tmp_path / "sub" / "report.md", "x")
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "sub" / "report.md").stat().st_mode) == mode
    assert stat.S_IMODE((tmp_path / "sub").stat().st_mode) == 0o777 & ~umask
