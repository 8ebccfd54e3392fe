"""Environment faults are named, not internal: a read-only or full file system under a job
folder, a sweep folder or the cache is one line naming the path and what to do, exit 2 (3 stays
for the project's own bugs), and nothing is left half-written.

Real file systems (support.mounts: a read-only tmpfs, a 64 KiB one that fills up), since the
tests run as root in CI and root ignores a chmod; skipped, saying why, where mounting is not
permitted."""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import compose_config, config_record, mini_overrides, run_app
from support.fakes import CountingEncoder
from support.mounts import nearly_full, read_only

from retrieval_bench.encoders.cache import EmbeddingCache
from retrieval_bench.errors import EnvironmentFault, environment_fault
from retrieval_bench.job.result import JobResult
from retrieval_bench.jobdir.write import write_job
from run.exits import report


def refused(call: Any) -> tuple[OSError, EnvironmentFault]:
    """The OSError `call` raises and the fault it is reported as."""
    with pytest.raises(OSError) as raised:
        call()
    fault = environment_fault(raised.value)
    assert fault is not None, raised.value
    return raised.value, fault


def assert_whole(folder: Path) -> None:
    """No temp file left, and every JSON file there parses: nothing half-written."""
    assert not [p for p in folder.rglob("*") if p.name.endswith(".tmp")]
    for path in folder.rglob("*.json"):
        json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture
def config(tmp_path: Path) -> dict[str, Any]:
    """The mini job's config, as the app hands it to write_job."""
    return config_record(compose_config(mini_overrides(tmp_path)))


def test_a_job_folder_on_a_read_only_file_system_is_named(
    mini_job: tuple[JobResult, Path],
    config: dict[str, Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    result, _ = mini_job
    with read_only(tmp_path / "ro") as ro:
        error, fault = refused(lambda: write_job(ro / "job", result, config))
        assert error.errno == errno.EROFS
        assert str(fault) == (
            f"{ro / 'job'}: the file system is read-only; point the output to a writable folder"
        )
        assert report(error) == 2  # run.exits: exit 2, one line
        assert capsys.readouterr().err == f"error: {fault}\n"


def test_a_job_folder_that_fills_its_disk_is_named_and_left_whole(
    mini_job: tuple[JobResult, Path], config: dict[str, Any], tmp_path: Path
) -> None:
    result, _ = mini_job
    with nearly_full(tmp_path / "full") as full:
        job = full / "job"
        error, fault = refused(lambda: write_job(job, result, config))
        assert error.errno == errno.ENOSPC
        assert str(fault).startswith(f"{job}/") and str(fault).endswith(
            ": no space left on the device; free space there, or point the output to another "
            "disk"
        ), str(fault)
        named = fault.naming({job: "hydra.run.dir"})
        assert str(named).endswith("or point hydra.run.dir to another disk")
        assert_whole(full)


def test_an_embedding_cache_that_fills_its_disk_is_named_and_left_whole(tmp_path: Path) -> None:
    texts = [f"第{i}段" for i in range(3000)]  # 3000 x 8 float32: 96 KiB, more than the disk
    with nearly_full(tmp_path / "full") as full:
        cache = EmbeddingCache(full / "embeddings")
        error, fault = refused(lambda: cache.encode(CountingEncoder(), texts, "passages"))
        assert error.errno == errno.ENOSPC
        assert str(fault).startswith(str(full / "embeddings")) and ".npy: no space" in str(fault)
        assert not list(full.rglob("*.json"))  # no sidecar for vectors that were not written
        assert_whole(full)


@pytest.mark.slow  # the app as a subprocess
def test_the_app_names_a_read_only_job_folder_and_a_full_sweep_folder(tmp_path: Path) -> None:
    with read_only(tmp_path / "ro") as ro:
        job = run_app(["retriever=bm25", f"hydra.run.dir={ro / 'job'}"])
        assert job.returncode == 2, job.stderr
        assert job.stderr.strip().splitlines()[-1] == (
            f"error: {ro / 'job'}: the file system is read-only; point the output to a "
            "writable folder"
        )
    with nearly_full(tmp_path / "full") as full:
        sweep = run_app(["-m", "retriever=bm25", f"hydra.sweep.dir={full / 'sweep'}"])
        assert sweep.returncode == 2, sweep.stderr
        last = sweep.stderr.strip().splitlines()[-1]
        assert last.startswith(f"error: {full / 'sweep'}/") and last.endswith(
            "no space left on the device; free space there, or point hydra.sweep.dir to "
            "another disk"
        ), last
        assert_whole(full)
        marker = next(full.rglob("UNFINISHED"), None)
        if marker is not None:  # when the disk left room for it, it says why
            assert "no space left" in marker.read_text() or "running" in marker.read_text()
