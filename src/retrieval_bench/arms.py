"""Arms built from config: each `arms.<name>` node is instantiated by Hydra (its `_target_` a
class anywhere on the path, its other keys that class's keyword arguments), then built against
the job's corpus. Nothing here knows any arm by name."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, TypeVar, cast

from hydra.errors import InstantiationException
from hydra.utils import instantiate

from retrieval_bench.components import Arm, ArmSpec, BuildContext
from retrieval_bench.errors import BenchError, ConfigError, nearest_hint

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


def build_arms(
    names: Sequence[str],
    nodes: Mapping[str, Mapping[str, Any]],
    ctx: BuildContext,
    phase: Callable[[str], AbstractContextManager[Any]],
    given: Mapping[str, Arm | ArmSpec] | None = None,
) -> dict[str, Arm]:
    """Every arm of `names`, from `given` (a library caller's own Arm or ArmSpec objects) or
    else its `nodes[name]` config: each spec's optional `check` runs first (so nothing is
    indexed when any arm cannot run), then each `build`, timed under `phase("index_<name>")`."""
    given = given or {}
    # An object with `build` is a spec (built against the corpus) even if it is also the arm.
    ready = {
        name: cast(Arm, given[name])
        for name in names
        if isinstance(given.get(name), Arm) and not callable(getattr(given[name], "build", None))
    }
    specs: dict[str, ArmSpec] = {
        name: given[name] if name in given else instantiate_spec(name, nodes[name])  # type: ignore[misc]
        for name in names
        if name not in ready
    }
    with phase("load"):
        for name, spec in specs.items():
            check = getattr(spec, "check", None)
            if check is not None:
                check(name, ctx)
    arms: dict[str, Arm] = {}
    for name in names:
        if name in ready:
            arms[name] = ready[name]
            continue
        with phase(f"index_{name}"):
            arms[name] = specs[name].build(name, ctx)
    return arms


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
