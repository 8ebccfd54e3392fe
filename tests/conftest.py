"""Shared fixtures: the small native dataset under tests/fixtures and a runner for the app."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "mini"
SHARED_BENCHMARKS = ROOT.parent / "shared" / "benchmarks"


def mini_overrides(tmp_path: Path) -> list[str]:
    return [
        "dataset.name=mini",
        f"dataset.corpus={FIXTURE / 'corpus' / 'mini'}",
        f"dataset.evalset={FIXTURE / 'evalsets' / 'mini.jsonl'}",
        f"cache_dir={tmp_path / 'cache'}",
    ]


def run_app(args: list[str], cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HYDRA_FULL_ERROR": "0", "PYTHONUNBUFFERED": "1"}
    return subprocess.run(
        [sys.executable, "-m", "run", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One embedding cache for the whole session, so the fixture is encoded once."""
    return tmp_path_factory.mktemp("cache")
