"""tuned.yaml: the configuration chosen on all queries, as a primary config for the app.

`python -m run --config-dir <tune folder> --config-name tuned` composes it: its defaults list
takes the shipped `config` (found on the app's own search path), re-selects the groups the
tuning's job overrides chose (`override /dataset: beir`), and its body sets the job's value
overrides and the chosen values. It is composed again here with Hydra's compose API and
compared with the configuration the search scored, so a file that would run anything else is
never left behind."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import yaml
from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from retrieval_bench.config import RunConfig, register_configs
from retrieval_bench.config.tune import TuneConfig
from retrieval_bench.errors import ConfigError
from retrieval_bench.io.atomic import atomic_write_text
from retrieval_bench.tune.names import TUNED_CONFIG_NAME, TUNED_YAML

# Override roots that are not the job's: how it is run, and the tuning's own settings.
NOT_JOB = ("hydra", "tune")


def job_overrides(overrides: Sequence[str]) -> list[str]:
    """The overrides that describe the job (not `hydra.*`, `hydra/...` or `tune.*`)."""
    parsed = OverridesParser.create().parse_overrides(list(overrides))
    return [
        text
        for text, override in zip(overrides, parsed, strict=True)
        if override.key_or_group.split(".")[0].split("/")[0] not in NOT_JOB
    ]


def tuned_document(
    overrides: Sequence[str],
    chosen: Mapping[str, Any],
    groups: Sequence[Path],
    searchpath: Sequence[str] = (),
) -> dict[str, Any]:
    """The YAML document: `config`, the overrides' group choices, then their values and the
    chosen ones in the body. `groups`: config folders whose sub-folders are config groups."""
    defaults: list[Any] = ["config"]
    body: dict[str, Any] = {}
    for override in OverridesParser.create().parse_overrides(job_overrides(overrides)):
        key = override.key_or_group
        if override.is_delete():
            raise ConfigError(key, "a deletion (~key) cannot be carried into tuned.yaml")
        if "." not in key and any((folder / key).is_dir() for folder in groups):
            entry = f"/{key}" if override.is_add() else f"override /{key}"
            defaults.append({entry: override.value()})
        else:
            _nest(body, key, override.value())
    for key, value in chosen.items():
        _nest(body, key.lstrip("+"), value)
    document: dict[str, Any] = {"defaults": [*defaults, "_self_"]}
    if searchpath:
        document["hydra"] = {"searchpath": list(searchpath)}
    document.update(body)
    return document


def _nest(body: dict[str, Any], key: str, value: Any) -> None:
    node = body
    *parents, last = key.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value


def write_tuned(
    folder: Path,
    document: Mapping[str, Any],
    header: str,
    expected: RunConfig,
    conf_dirs: Sequence[Path],
) -> Path:
    """Write tuned.yaml after checking that Hydra composes it to `expected` (the tuning
    settings aside); a difference is a bug, raised as RuntimeError naming the keys."""
    text = header + yaml.safe_dump(dict(document), allow_unicode=True, sort_keys=False)
    staging = folder / f".{TUNED_YAML}.check"
    staging.mkdir(parents=True, exist_ok=True)
    (staging / TUNED_YAML).write_text(text, encoding="utf-8")
    try:
        composed = compose_tuned(staging, conf_dirs)
    finally:
        (staging / TUNED_YAML).unlink(missing_ok=True)
        staging.rmdir()
    got, want = replace(composed, tune=TuneConfig()), replace(expected, tune=TuneConfig())
    if got != want:
        mine = cast(dict[str, Any], OmegaConf.to_container(OmegaConf.structured(want)))
        theirs = cast(dict[str, Any], OmegaConf.to_container(OmegaConf.structured(got)))
        diff = sorted(k for k in {*mine, *theirs} if mine.get(k) != theirs.get(k))
        raise RuntimeError(f"tuned.yaml composes to another configuration (differs in {diff})")
    path = folder / TUNED_YAML
    atomic_write_text(path, text)
    return path


def compose_tuned(folder: Path, conf_dirs: Sequence[Path]) -> RunConfig:
    """tuned.yaml in `folder` composed as `python -m run --config-dir <folder> --config-name
    tuned` would (the shipped conf, and any user config folder, on the search path)."""
    register_configs()
    paths = ",".join(f"file://{Path(d).resolve()}" for d in conf_dirs)
    with initialize_config_dir(config_dir=str(folder.resolve()), version_base="1.3"):
        composed = compose(
            config_name=TUNED_CONFIG_NAME, overrides=[f"hydra.searchpath=[{paths}]"]
        )
    return cast(RunConfig, OmegaConf.to_object(composed))
