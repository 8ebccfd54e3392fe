"""Shared fixtures: the small native dataset under tests/fixtures, the job in-process (the
library API with a config composed by Hydra's compose API) and, for exit codes, the app as a
subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf

from retrieval_bench.config import RetrieverConfig, RunConfig, register_configs
from retrieval_bench.config.schema import BUILTIN_COMBINERS
from retrieval_bench.job.build import build_combiners
from retrieval_bench.job.check import check_config
from retrieval_bench.job.result import JobResult
from retrieval_bench.job.runner import run_job
from retrieval_bench.jobdir.write import write_job
from retrieval_bench.protocols import BuildContext, Combiner
from retrieval_bench.tiebreak import TieBreak

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "mini"
SHARED_BENCHMARKS = ROOT.parent / "shared" / "benchmarks"
# Under CI the shared benchmarks must be there: a test that needs them fails instead of skipping.
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}

register_configs()


def mini_overrides(tmp_path: Path) -> list[str]:
    return [
        "dataset.name=mini",
        f"dataset.corpus={FIXTURE / 'corpus' / 'mini'}",
        f"dataset.evalset={FIXTURE / 'evalsets' / 'mini.jsonl'}",
        f"cache_dir={tmp_path / 'cache'}",
    ]


def shared_benchmark(name: str) -> Path:
    """../shared/benchmarks/<name>: skipped when absent on a workstation, a failure under CI."""
    path = SHARED_BENCHMARKS / name
    if not path.is_dir():
        message = f"{path} is absent"
        if IN_CI:
            pytest.fail(f"{message}; CI must provide the shared benchmarks")
        pytest.skip(message)
    return path


def compiled_or_numpy(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, module: Any, what: str
) -> str:
    """For a fixture parametrised over ["compiled", "numpy"]: the test runs on `module`'s C
    extension (its `_kernel()`), then on the numpy path a machine without a compiler gets
    (`_kernel` patched to None). The compiled run fails under CI when the extension is not
    built, and is skipped elsewhere."""
    if request.param == "numpy":
        monkeypatch.setattr(module, "_kernel", lambda: None)
    elif module._kernel() is None:
        if IN_CI:
            pytest.fail(f"{what} is not built; CI must build it")
        pytest.skip(f"{what} is not built here")
    return str(request.param)


def compose_dict(overrides: list[str]) -> DictConfig:
    """The app's config with `overrides`, composed as `python -m run` would compose it."""
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose(config_name="config", overrides=overrides)


def compose_config(overrides: list[str]) -> RunConfig:
    """The typed, validated RunConfig for `overrides` (raises ConfigError as the app would)."""
    cfg = cast(RunConfig, OmegaConf.to_object(compose_dict(overrides)))
    check_config(cfg)
    return cfg


def built_combiners(retriever: RetrieverConfig) -> dict[str, Combiner]:
    """Every built-in combiner as a job builds it for `retriever` (its settings and weights)."""
    cfg = RunConfig(retriever=retriever)
    ctx = BuildContext(
        passages=(), queries=(), cfg=cfg, tie_break=TieBreak([]), cache_dir=Path(".")
    )
    return build_combiners(cfg, list(BUILTIN_COMBINERS), ctx)


def run_in_process(overrides: list[str], tmp_path: Path) -> tuple[JobResult, Path]:
    """One job through the library (run_job + write_job), its files under tmp_path / "run";
    the same work as `python -m run <overrides>` without a process start."""
    dict_cfg = compose_dict(overrides)
    cfg = cast(RunConfig, OmegaConf.to_object(dict_cfg))
    check_config(cfg)
    result = run_job(cfg)
    config = cast(dict[str, Any], OmegaConf.to_container(dict_cfg, resolve=True))
    return result, write_job(tmp_path / "run", result, config)


def run_app(args: list[str], cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """`python -m run <args>` as a subprocess: for exit codes and the Hydra layer only (slow)."""
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
