"""The app's config composed with Hydra's compose API, as `python -m run <overrides>` composes
it: the shipped `conf/` (or another primary folder), untyped, interpolations kept. `api.compose`
types and checks it; a tuning keeps it to set trial values the way Hydra would."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import cast

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from retrieval_bench.config.renamed import announce, rewrite_overrides
from retrieval_bench.config.schema import RunConfig, register_configs
from retrieval_bench.errors import bench_cause
from retrieval_bench.paths import PROJECT_ROOT

CONF_DIR = PROJECT_ROOT / "conf"


def compose_dict(overrides: Sequence[str] = (), config_dir: str | Path | None = None) -> DictConfig:
    """The composed config (Hydra's own errors for a bad override); arms from a user config
    folder are reached with `hydra.searchpath=[file://DIR]` among the overrides. An old key's
    spelling is read as its new home, with one notice line per old key (config.renamed)."""
    register_configs()
    rewritten, notices = rewrite_overrides(overrides)
    announce(notices)
    with initialize_config_dir(config_dir=str(Path(config_dir or CONF_DIR)), version_base="1.3"):
        return compose(config_name="config", overrides=rewritten)


def typed_config(composed: DictConfig) -> RunConfig:
    """The RunConfig a composed config holds (interpolations resolved); a refusal raised while
    resolving (a preset's `${required:...}`) is raised as itself, a ConfigError naming the key."""
    try:
        return cast(RunConfig, OmegaConf.to_object(composed))
    except OmegaConfBaseException as exc:
        inner = bench_cause(exc)
        if inner is None:
            raise
        raise inner from None
