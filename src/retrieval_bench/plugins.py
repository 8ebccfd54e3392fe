"""The one plug-in convention: a config node names a class by `_target_` (anywhere on the path,
not only in this package) and its other keys are that class's keyword arguments, checked against
the class's typed node, so a typo fails naming the key and its nearest known name before any
work. Arms, combiners, stages and encoders are all built this way."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar

from hydra.errors import InstantiationException
from hydra.utils import instantiate

from retrieval_bench.errors import BenchError, ConfigError, nearest_hint
from retrieval_bench.protocols import ArmSpec

T = TypeVar("T")


def instantiate_spec(name: str, node: Mapping[str, Any]) -> ArmSpec:
    """The ArmSpec of `arms.<name>`; a missing class, a bad keyword or a spec's own refusal
    fails naming the key under `arms.<name>`."""
    try:
        spec = instantiate(dict(node), _convert_="all")
    except InstantiationException as error:
        cause = error.__cause__
        if isinstance(cause, ConfigError):
            raise ConfigError(f"arms.{name}.{cause.key}", cause.message) from cause
        if isinstance(cause, BenchError):
            raise cause from None
        reason = f"{type(cause).__name__}: {cause}" if cause is not None else str(error)
        raise ConfigError(f"arms.{name}", f"cannot build {node.get('_target_')}: {reason}") from (
            cause or error
        )
    except ConfigError as error:
        raise ConfigError(f"arms.{name}.{error.key}", error.message) from error
    if not callable(getattr(spec, "build", None)):
        raise ConfigError(
            f"arms.{name}._target_", f"{node.get('_target_')} has no build(name, ctx) method"
        )
    return spec  # type: ignore[no-any-return]


def with_overrides(base: T, overrides: Mapping[str, Any]) -> T:
    """A copy of the typed config node `base` with an arm's keyword `overrides` (so the same
    kind of arm can run twice, differently); an unknown key raises ConfigError naming it and
    its nearest field, a nested node takes a mapping."""
    known = {f.name: f for f in dataclasses.fields(base)}  # type: ignore[arg-type]
    changes: dict[str, Any] = {}
    for key, value in overrides.items():
        if key not in known:
            raise ConfigError(key, f"unknown key; {nearest_hint(key, list(known))}")
        current = getattr(base, key)
        if dataclasses.is_dataclass(current) and isinstance(value, Mapping):
            try:
                value = with_overrides(current, value)
            except ConfigError as error:
                raise ConfigError(f"{key}.{error.key}", error.message) from error
        changes[key] = value
    return dataclasses.replace(base, **changes)  # type: ignore[type-var]
