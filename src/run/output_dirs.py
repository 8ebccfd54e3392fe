"""The Hydra callback that checks the folders a run writes into before Hydra creates them.

Hydra makes `hydra.run.dir` (one job) or `hydra.sweep.dir` (a multirun) before the task runs,
so an output path whose parent is a regular file would fail inside Hydra as an internal error
(exit 3). Registered first in `conf/config.yaml` under `hydra.callbacks.output_dirs`, this
checks the folder at the start of the run and stops it with exit 2 naming the key; for the
monthly benchmark, whose own log folder lies under `benchmark.root`, it names
`benchmark.root` when that is what cannot be a folder.
"""

from __future__ import annotations

from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from retrieval_bench.errors import ConfigError
from retrieval_bench.io.folders import check_output_dir
from run.exits import JobFailed


def _check(config: DictConfig, mode: str) -> None:
    """ConfigError naming `hydra.<mode>.dir` (or `benchmark.root`) when that folder cannot be
    made; raised as JobFailed, which Hydra's callback runner (it only warns about an Exception)
    lets pass."""
    key = f"hydra.{mode}.dir"
    try:
        benchmark = config.get("benchmark")
        if benchmark is not None and benchmark.get("enabled"):
            check_output_dir(str(benchmark.root), "benchmark.root")
        try:
            folder = str(config.hydra[mode].dir)
        except OSError as exc:  # the ${new_dir:...} resolver could not create its folder
            raise ConfigError(key, f"cannot create the folder: {exc}") from None
        check_output_dir(folder, key)
    except ConfigError as exc:
        raise JobFailed(exc) from None


class CheckOutputDirs(Callback):
    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        _check(config, "run")

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        _check(config, "sweep")
