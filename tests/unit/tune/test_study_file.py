"""A tuning's SQLite study file that cannot be used (corrupt, truncated, locked by another
process) is named with what to do, exit 2, and left as it was; so is a `tune.dir` under a
regular file. Real SQLite files, opened through Optuna's storage as a tuning opens them."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from retrieval_bench.tune import study as study_module
from retrieval_bench.tune.names import STUDY_DB
from retrieval_bench.tune.study import (
    StudyFileError,
    make_sampler,
    open_study,
    sqlite_storage,
    study_file_faults,
)
from run.exits import bad_input_message

PLAN = {"space": "x"}


def a_good_study(folder: Path) -> bytes:
    folder.mkdir(parents=True, exist_ok=True)
    with study_file_faults(folder):
        open_study(
            sqlite_storage(folder), "all", make_sampler("random", 0), "maximize", PLAN, folder
        )
    with sqlite3.connect(folder / STUDY_DB) as db:  # fold the write-ahead log into the file
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return (folder / STUDY_DB).read_bytes()


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        (lambda good: b"not a database at all" * 100, "is corrupt or truncated (file is not a"),
        (lambda good: good[: len(good) // 2], "is corrupt or truncated (database disk image is"),
    ],
)
def test_a_corrupt_or_truncated_study_file_is_named_and_kept(
    tmp_path: Path, damage: object, says: str
) -> None:
    good = a_good_study(tmp_path / "good")
    folder = tmp_path / "damaged"
    folder.mkdir()
    bad = damage(good)  # type: ignore[operator]
    (folder / STUDY_DB).write_bytes(bad)
    with pytest.raises(StudyFileError) as refused, study_file_faults(folder):
        storage = sqlite_storage(folder)
        open_study(storage, "all", make_sampler("random", 0), "maximize", PLAN, folder)
    message = str(refused.value)
    assert message.startswith(f"{folder / STUDY_DB}: the study file {says}"), message
    assert "move it away to start this tuning afresh" in message
    assert bad_input_message(refused.value) == message  # exit 2
    assert (folder / STUDY_DB).read_bytes() == bad  # left as it was


@pytest.fixture
def locked(tmp_path: Path) -> Iterator[Path]:
    """A good study file that another process holds an exclusive lock on."""
    folder = tmp_path / "locked"
    a_good_study(folder)
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sqlite3, sys; db = sqlite3.connect(sys.argv[1], isolation_level=None); "
         "db.execute('BEGIN EXCLUSIVE'); print('held', flush=True); sys.stdin.read()",
         str(folder / STUDY_DB)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    yield folder
    holder.communicate("", timeout=30)


def test_a_study_file_locked_by_another_process_is_named(
    locked: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(study_module, "BUSY_TIMEOUT_S", 0.2)
    before = (locked / STUDY_DB).read_bytes()
    with pytest.raises(StudyFileError) as refused, study_file_faults(locked):
        storage = sqlite_storage(locked)
        open_study(storage, "fold-0", make_sampler("random", 0), "maximize", PLAN, locked)
    message = str(refused.value)
    assert message.startswith(f"{locked / STUDY_DB}: the study file is locked by another process")
    assert message.endswith("close that, then rerun the same command to resume")
    assert (locked / STUDY_DB).read_bytes() == before
