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


def test_a_write_interrupted_by_ctrl_c_leaves_the_old_file_and_no_temp(tmp_path: Path) -> None:
    """Ctrl-C raises KeyboardInterrupt (not an Exception) wherever the writer is: the temp
    file goes, the target keeps its old content."""
    from retrieval_bench.io.atomic import atomic_writer

    target = tmp_path / "metrics.json"
    target.write_text("old\n", encoding="utf-8")
    with pytest.raises(KeyboardInterrupt), atomic_writer(target) as handle:
        handle.write(b"half a new fi")
        raise KeyboardInterrupt
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json"]
    assert target.read_text(encoding="utf-8") == "old\n"
