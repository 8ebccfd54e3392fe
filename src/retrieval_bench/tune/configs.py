"""A trial's values -> the RunConfig that composing the job's overrides plus the trial's would
give, without composing: Hydra's compose takes about a second, a trial's replay milliseconds.

The composed job (`base`, a DictConfig kept with its interpolations) is the reference. When no
searched key is read by an interpolation (`stages.rerank.depth: ${retriever.pool_size}`), a trial's
config is the typed base with the trial's values set in place, each converted as OmegaConf
would (an int into a float field); otherwise every trial goes through OmegaConf (set the values
in a copy of `base`, then `to_object`), which re-resolves the interpolations. Either way the
chosen configurations are composed again by Hydra at the end and compared with what ran
(tune.run)."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import fields, is_dataclass
from typing import Any, cast

from omegaconf import DictConfig, ListConfig, Node, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from retrieval_bench.config import RunConfig, validate
from retrieval_bench.errors import ConfigError
from retrieval_bench.fusion import check_fusion

_REFERENCE = re.compile(r"\$\{([^}:${]+)\}")


class TrialConfigs:
    def __init__(self, base: DictConfig, keys: Sequence[str]) -> None:
        self.base = base
        self.typed = cast(RunConfig, OmegaConf.to_object(base))
        read = set(interpolated_keys(base))
        self.in_place = not any(_related(key, ref) for key in keys for ref in read)

    def make(self, values: Mapping[str, Any]) -> RunConfig:
        """The config with `values` (job key -> value) set; the schema's own checks and the
        fusion checks run on it (ConfigError for a combination the job would refuse)."""
        if self.in_place:
            cfg = copy.deepcopy(self.typed)
            for key, value in values.items():
                set_key(cfg, key, value)
        else:
            cfg = self.composed(values)
        validate(cfg)
        check_fusion(cfg.retriever)
        return cfg

    def composed(self, values: Mapping[str, Any]) -> RunConfig:
        """Through OmegaConf: the values set in a copy of the composed job, then typed (what
        Hydra does with the same overrides, interpolations re-resolved)."""
        node = copy.deepcopy(self.base)
        for key, value in values.items():
            try:
                OmegaConf.update(node, key, value, merge=True)  # as Hydra applies overrides
            except OmegaConfBaseException as exc:
                raise ConfigError(key, str(exc).splitlines()[0]) from exc
        try:
            return cast(RunConfig, OmegaConf.to_object(node))
        except OmegaConfBaseException as exc:
            raise ConfigError(",".join(values), str(exc).splitlines()[0]) from exc


def set_key(cfg: object, key: str, value: Any) -> None:
    """Set dotted `key` in a typed config (dataclasses and dicts), converting `value` as
    OmegaConf would for the field's current type (int -> float; a list's ints -> floats)."""
    parts = key.split(".")
    node: Any = cfg
    for part in parts[:-1]:
        node = node[part] if isinstance(node, dict) else getattr(node, part)
    last = parts[-1]
    current = node.get(last) if isinstance(node, dict) else getattr(node, last)
    value = _like(current, value, key)
    if isinstance(current, dict) and isinstance(value, dict):
        value = {**current, **value}  # a mapping merges into a mapping, as Hydra's override
    if isinstance(node, dict):
        node[last] = value
    elif is_dataclass(node) and last in {f.name for f in fields(node)}:
        setattr(node, last, value)
    else:
        raise KeyError(key)


def _like(current: Any, value: Any, key: str) -> Any:
    integer = isinstance(value, int) and not isinstance(value, bool)
    if isinstance(current, float) and integer:
        return float(value)
    if isinstance(current, int) and not isinstance(current, bool) and isinstance(value, float):
        raise ConfigError(
            key, f"is an integer, got {value!r}: search it with range(a,b) or choice(...)"
        )
    if isinstance(value, list):
        return [float(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in value]
    if isinstance(value, dict):
        return {k: _like(None, v, key) for k, v in value.items()}
    return value


def interpolated_keys(node: DictConfig | ListConfig) -> Iterator[str]:
    """Every key an interpolation in the config reads (`${retriever.pool_size}`)."""
    items = node.items_ex(resolve=False) if isinstance(node, DictConfig) else enumerate(node)
    for name, _ in items:
        child = node._get_node(name)  # type: ignore[arg-type]
        if isinstance(child, (DictConfig, ListConfig)):
            yield from interpolated_keys(child)
        elif isinstance(child, Node) and child._is_interpolation():
            yield from _REFERENCE.findall(str(child._value()))


def _related(key: str, reference: str) -> bool:
    return key == reference or reference.startswith(key + ".") or key.startswith(reference + ".")
