"""An unusable cache folder is the user's error naming `cache_dir` (`io.folders`), found before any
work."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FIXTURE
from support.mounts import read_only

from retrieval_bench.config import RunConfig
from retrieval_bench.errors import ConfigError
from retrieval_bench.io.folders import writable_dir
from retrieval_bench.job.runner import run_job


def test_an_uncreatable_cache_dir_names_cache_dir(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(ConfigError) as info:
        writable_dir(blocker / "cache", "cache_dir")
    assert str(info.value) == (
        f"config key 'cache_dir': {blocker / 'cache'}: cannot write there (Not a directory)"
    )


def test_a_read_only_cache_dir_names_cache_dir(tmp_path: Path) -> None:
    """A real read-only mount (root, as CI runs the tests, ignores a chmod'ed folder's bits):
    skipped, saying why, where mounting is not permitted."""
    with read_only(tmp_path / "ro") as ro, pytest.raises(ConfigError) as info:
        writable_dir(ro / "cache", "cache_dir", ["tokens", "embeddings"])
    assert str(info.value) == (
        f"config key 'cache_dir': {ro / 'cache'}: cannot write there (Read-only file system)"
    )


def test_run_job_refuses_the_cache_dir_before_any_work(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    cfg = RunConfig(cache_dir=str(blocker / "cache"))
    cfg.dataset.corpus = str(tmp_path / "no-such-corpus")  # never read: the check comes first
    cfg.dataset.evalset = str(FIXTURE / "evalsets" / "mini.jsonl")
    with pytest.raises(ConfigError, match=r"^config key 'cache_dir': "):
        run_job(cfg)
