"""The Hydra callback that gives a tracked sweep (`tracking=mlflow`) its parent run.

Registered in `conf/config.yaml` under `hydra.callbacks.tracking`, before `compare`: Hydra ends
callbacks in reverse order, so the comparison is written before this callback logs it. With
`tracking=none` it does nothing and imports nothing.

At the sweep's start it checks the tracker answers (exit 2 naming tracking.uri otherwise) and
starts the sweep's logger (`tracking.live`), which creates the parent run. Jobs the basic
launcher runs in this process hand their folders to that logger; for launchers that start jobs
elsewhere (joblib's workers, submitit's processes and SLURM nodes) it first waits for the parent
run's id and puts it in the environment they inherit. At the end the logger logs the comparison
and anything not logged yet; what it could not log is one warning naming `run.track sync`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

# Launchers that run every job in the sweep's own process.
_IN_PROCESS = ("hydra._internal.core_plugins.basic_launcher.BasicLauncher",)


class TrackingCallback(Callback):
    """Holds nothing itself: launchers pickle their callbacks into the jobs' processes, and the
    sweep's logger (a process and its reader threads) lives in `LiveLogger.current`."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        node = config.get("tracking")
        if node is None or node.get("kind", "none") == "none":
            return
        from retrieval_bench.config.tracking import TrackingConfig
        from retrieval_bench.errors import EXIT_BAD_INPUT, ConfigError
        from retrieval_bench.tracking.live import LiveLogger, check_reachable

        cfg = OmegaConf.to_object(node)
        assert isinstance(cfg, TrackingConfig)
        sweep_dir = Path(str(config.hydra.sweep.dir))
        try:
            cfg.validate()
            check_reachable(cfg)
            sweep_dir.mkdir(parents=True, exist_ok=True)
            logger = LiveLogger(cfg, sweep_dir=sweep_dir, dataset=_dataset_name(config))
            LiveLogger.current = logger
            if str(config.hydra.launcher.get("_target_", "")) not in _IN_PROCESS:
                logger.wait_parent()
        except ConfigError as exc:
            print(f"error: {exc}", file=sys.stderr, flush=True)
            raise SystemExit(EXIT_BAD_INPUT) from exc

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        from retrieval_bench.tracking.live import LiveLogger

        logger = LiveLogger.current
        if logger is None:
            return
        from retrieval_bench.errors import EXIT_BAD_INPUT, ConfigError

        try:
            warning = logger.finish()
        except ConfigError as exc:
            print(f"error: {exc}", file=sys.stderr, flush=True)
            raise SystemExit(EXIT_BAD_INPUT) from exc
        if warning:
            print(warning, file=sys.stderr, flush=True)
        else:
            print(f"tracking: sweep logged to {logger.cfg.uri}", flush=True)


def _dataset_name(config: DictConfig) -> str:
    """The dataset the sweep's experiment is named after (`tracking.experiment` empty): its
    name, or a BEIR folder's name."""
    dataset = config.get("dataset") or {}
    return str(dataset.get("name") or Path(str(dataset.get("path") or "dataset")).name)
