"""The one plug-in convention: a config node names a class by `_target_` (anywhere on the path,
not only in this package) and its other keys are that class's keyword arguments, checked against
the class's typed node, so a typo fails naming the key and its nearest known name before any
work. Arms, combiners, stages and encoders are all built this way."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from hydra.errors import InstantiationException
from hydra.utils import instantiate

from retrieval_bench.errors import BenchError, ConfigError, nearest_hint

T = TypeVar("T")


def locate(key: str, target: object, known: Sequence[str] = ()) -> type:
    """The class `target` names (a dotted path); ConfigError naming `key` when it is not a
    string, its module does not import, or the module has no such class, with the nearest name:
    among the module's classes when the module imports, else among `known` (the built-ins)."""
    if not isinstance(target, str) or "." not in target:
        raise ConfigError(key, f"needs a class path such as my_module.MyClass, got {target!r}")
    module_name, _, attribute = target.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        hint = nearest_hint(target, list(known)) if known else "is it on PYTHONPATH?"
        raise ConfigError(key, f"cannot import {target!r} ({exc}); {hint}") from exc
    except Exception as exc:
        raise ConfigError(
            key,
            f"cannot import {target!r}: importing {module_name} raised {type(exc).__name__}: {exc}",
        ) from exc
    found = getattr(module, attribute, None)
    if not isinstance(found, type):
        # The module's own classes, not the names it imports (Path, OrderedDict, ...).
        classes = [
            name
            for name, value in vars(module).items()
            if isinstance(value, type) and value.__module__ == module_name
        ]
        raise ConfigError(
            key,
            f"{module_name} has no class {attribute!r}; "
            f"{nearest_hint(attribute, classes, f'{module_name}.')}",
        )
    return found


def _check_keywords(key: str, cls: type, keywords: Mapping[str, Any]) -> None:
    """Each keyword must be a parameter of `cls` (its typed node): an unknown one is refused
    naming `key.<keyword>` and its nearest parameter. A class taking **kwargs checks its own
    (the built-in specs check them against their config node with `with_overrides`)."""
    try:
        parameters = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return
    names = [name for name, p in parameters.items() if p.kind is not p.VAR_POSITIONAL]
    for keyword in keywords:
        if keyword not in names:
            raise ConfigError(
                f"{key}.{keyword}",
                f"unknown key; {nearest_hint(keyword, names)} ({cls.__qualname__} takes "
                f"{', '.join(names) or 'no keyword arguments'})",
            )


def instantiate_plugin(
    key: str,
    node: Mapping[str, Any],
    kind: str,
    methods: Sequence[str],
    known: Sequence[str] = (),
) -> Any:
    """The plug-in the config node at `key` (`arms.bm25`, `stages.rerank`, ...) names: its
    `_target_` class built with the node's other keys. A class that cannot be found, a keyword
    the class does not take, a spec's own refusal of a value, or a class without the `methods`
    of its protocol (`kind`, e.g. "StageSpec") fails as a ConfigError naming the key under
    `key`. `known`: the built-in targets of this kind, for the nearest-name hint."""
    target = node.get("_target_")
    cls = locate(f"{key}._target_", target, known)
    keywords = {k: v for k, v in node.items() if k != "_target_"}
    _check_keywords(key, cls, keywords)
    missing = [m for m in methods if not callable(getattr(cls, m, None))]
    if missing:
        raise ConfigError(
            f"{key}._target_",
            f"{target} is not a {kind}: it has no {missing[0]}() method "
            f"(a {kind} has {', '.join(f'{m}()' for m in methods)}; see retrieval_bench.protocols)",
        )
    try:
        # Not recursive: a nested node is the plug-in's own keyword (a dense arm's `encoder`
        # overrides, `_target_` included), applied to its typed node by the plug-in itself.
        return instantiate(dict(node), _convert_="all", _recursive_=False)
    except InstantiationException as error:
        cause = error.__cause__
        if isinstance(cause, ConfigError):
            raise ConfigError(f"{key}.{cause.key}", cause.message) from cause
        if isinstance(cause, BenchError):
            raise cause from None
        reason = f"{type(cause).__name__}: {cause}" if cause is not None else str(error)
        raise ConfigError(key, f"cannot build {target}: {reason}") from (cause or error)
    except ConfigError as error:
        raise ConfigError(f"{key}.{error.key}", error.message) from error


def with_overrides(base: T, overrides: Mapping[str, Any]) -> T:
    """A copy of the typed config node `base` with a plug-in's keyword `overrides` (so the same
    kind of arm or stage can run twice, differently); an unknown key raises ConfigError naming
    it and its nearest field, a nested node takes a mapping."""
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
