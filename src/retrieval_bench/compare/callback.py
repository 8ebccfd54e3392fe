"""The Hydra callback that ends every multirun with its comparison.

Registered in `conf/config.yaml` under `hydra.callbacks.compare`. It runs in the process that
launched the sweep, after every job has returned, whatever the launcher (basic, joblib,
submitit): it reads the finished job folders under the sweep folder, so it needs nothing from
the jobs' processes. Job folders already there when the sweep started, and not rewritten by it,
are left out, so a reused sweep folder never mixes two sweeps. Settings: the `compare:` node.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
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
        with _exit_on_bad_config():
            _check_baselines(config)

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
        from retrieval_bench.errors import BenchError, ConfigError

        sweep_dir = Path(str(config.hydra.sweep.dir))
        try:
            # A launcher that ran the jobs elsewhere left their plugins unimported here.
            from retrieval_bench.scoring.measure_names import canonical_compare_metrics
            from retrieval_bench.scoring.registry import load_plugins

            load_plugins(config.get("scoring", {}).get("plugins") or [], "scoring.plugins")
            cfg.validate()
            canonical_compare_metrics(cfg)
            result = compare_dirs([sweep_dir], cfg, out_dir=sweep_dir, unchanged=self._before)
        except ConfigError as exc:
            with _exit_on_bad_config():
                raise exc  # a `compare.*` key the jobs cannot satisfy: exit 2, naming it
        except BenchError as exc:
            # The jobs' own outputs stand; say why there is no comparison.
            print(f"comparison not built: {exc}", file=sys.stderr)
            return
        print(result.text, flush=True)


@contextlib.contextmanager
def _exit_on_bad_config() -> Iterator[None]:
    """A ConfigError becomes exit 2 with its one line, as the app reports it: Hydra turns
    whatever a callback raises into a warning, but not SystemExit."""
    from retrieval_bench.errors import EXIT_BAD_INPUT, ConfigError

    try:
        yield
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(EXIT_BAD_INPUT) from exc


def swept_values(config: DictConfig) -> tuple[dict[str, list[str]], bool]:
    """Each key the sweep varies -> its values as the command line (or the sweeper's `params`)
    spells them; and whether that is every swept key's (False when a `glob()` sweep, which
    only the config loader can enumerate, is among them)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    lines = [str(o) for o in config.hydra.overrides.task]
    params = config.hydra.sweeper.get("params") or {}
    lines += [f"{key}={value}" for key, value in params.items()]
    swept: dict[str, list[str]] = {}
    complete = True
    for override in OverridesParser.create().parse_overrides(lines):
        if not override.is_sweep_override():
            continue
        try:
            swept[override.key_or_group] = list(override.sweep_string_iterator())
        except HydraException:  # a glob sweep: the finished jobs will tell
            complete = False
    return swept, complete


def _check_baselines(config: DictConfig) -> None:
    """Refuse a `compare.baselines` entry the sweep cannot produce before its first job runs
    (ConfigError: exit 2 naming the key)."""
    from retrieval_bench.compare.baselines import check_sweep
    from retrieval_bench.config.compare import CompareConfig

    node = config.get("compare")
    cfg = OmegaConf.to_object(node) if node is not None else CompareConfig()
    assert isinstance(cfg, CompareConfig)
    if not cfg.enabled:
        return
    swept, complete = swept_values(config)
    check_sweep(cfg.baseline_settings(), swept, cfg.baseline_key(), complete)
