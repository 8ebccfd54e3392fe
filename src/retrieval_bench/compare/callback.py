"""The Hydra callback that ends every multirun with its comparison.

Registered in `conf/config.yaml` under `hydra.callbacks.compare`. It runs in the process that
launched the sweep, after every job has returned, whatever the launcher (basic, joblib,
submitit): it reads the finished job folders under the sweep folder, so it needs nothing from
the jobs' processes. Job folders already there when the sweep started, and not rewritten by it,
are left out, so a reused sweep folder never mixes two sweeps. Settings: the `compare:` node.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf


class CompareCallback(Callback):
    def __init__(self) -> None:
        self._before: dict[str, tuple[int, int]] = {}

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        from retrieval_bench.jobdir.read import snapshot

        self._before = snapshot(Path(str(config.hydra.sweep.dir)))

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        # Imported here: Hydra builds this callback in every job process too, and the
        # comparison's statistics (scipy.stats, about a second) only when it is wanted.
        from retrieval_bench.config.compare import CompareConfig

        node = config.get("compare")
        cfg = OmegaConf.to_object(node) if node is not None else CompareConfig()
        assert isinstance(cfg, CompareConfig)
        task = [str(o) for o in config.hydra.overrides.task]
        if not cfg.enabled or any(o.startswith("encoder.shard_only=") for o in task):
            return  # a sharded encode (encoder.shard_only=0,1,...) retrieves nothing
        from retrieval_bench.compare.build import compare_dirs
        from retrieval_bench.errors import BenchError

        sweep_dir = Path(str(config.hydra.sweep.dir))
        try:
            # A launcher that ran the jobs elsewhere left their plugins unimported here.
            from retrieval_bench.scoring.measure_names import canonical_compare_metrics
            from retrieval_bench.scoring.registry import load_plugins

            load_plugins(config.get("scoring", {}).get("plugins") or [], "scoring.plugins")
            cfg.validate()
            canonical_compare_metrics(cfg)
            result = compare_dirs([sweep_dir], cfg, out_dir=sweep_dir, unchanged=self._before)
        except BenchError as exc:
            # The jobs' own outputs stand; say why there is no comparison.
            print(f"comparison not built: {exc}", file=sys.stderr)
            return
        print(result.text, flush=True)
