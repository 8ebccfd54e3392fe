"""Every config key can be overridden from the command line, and validation names the key."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import ROOT
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, ListConfig, OmegaConf

from retrieval_bench.config import RunConfig, register_configs, validate
from retrieval_bench.errors import ConfigError

register_configs()


def compose_run(overrides: list[str]) -> DictConfig:
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose(config_name="config", overrides=overrides)


def leaves(node: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(node, DictConfig):
        for key in node:
            if OmegaConf.is_missing(node, key):
                continue
            yield from leaves(node[key], f"{prefix}{key}.")
    elif not isinstance(node, ListConfig):
        yield prefix[:-1], node


def test_every_scalar_key_accepts_an_override() -> None:
    cfg = compose_run([])
    overrides = []
    for key, value in leaves(cfg):
        # Keys holding "@" (metric names as mapping keys) cannot be spelled as overrides.
        if key.startswith("hydra") or value is None or "@" in key:
            continue
        text = str(value).lower() if isinstance(value, bool) else repr(value)
        overrides.append(f"{key}={text}" if not isinstance(value, str) else f"{key}='{value}'")
    assert len(overrides) > 30
    again = compose_run(overrides)
    assert OmegaConf.to_container(again) == OmegaConf.to_container(cfg)


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("top_k=0", "top_k"),
        ("retriever.pool_size=-3", "retriever.pool_size"),
        ("retriever.rrf_k=-1", "retriever.rrf_k"),
        ("retriever.arms=[bm25,sparse]", "retriever.arms"),
        ("bm25.b=1.5", "bm25.b"),
        ("scoring.cutoffs=[10,0]", "scoring.cutoffs[1]"),
    ],
)
def test_out_of_range_values_name_their_key(override: str, key: str) -> None:
    cfg: RunConfig = OmegaConf.to_object(compose_run([override]))  # type: ignore[assignment]
    with pytest.raises(ConfigError, match=re.escape(f"config key '{key}'")):
        validate(cfg)


def test_defaults_validate() -> None:
    validate(OmegaConf.to_object(compose_run([])))  # type: ignore[arg-type]
