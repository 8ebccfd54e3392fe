"""Typed keyword arguments: a plug-in's keyword read as its annotation reads it (pydantic's lax
mode), so `arms.bm25.k1=abc` is refused naming the key at the config check; a plug-in's keyword
overrides applied to a typed node (`with_overrides`); a shipped plug-in's node made from its
settings dataclass (`node_of`). Here, below the plug-in convention (retrieval_bench.plugins),
because the schema checks the shipped plug-ins' nodes with it without importing them."""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from retrieval_bench.errors import ConfigError, nearest_hint

T = TypeVar("T")


def annotated_value(key: str, annotation: Any, value: Any) -> Any:
    """`value` as `annotation` reads it (pydantic's lax mode: 3 for a float is 3.0, a list for
    a tuple is a tuple), or ConfigError naming `key`, the type and the value: `2.5` or `'abc'`
    for an int fails here, at the config check, not as a TypeError deep inside the plug-in.
    No annotation, `Any`, or one pydantic cannot check (an arbitrary class) passes as is."""
    if annotation is None or annotation is Any:
        return value
    adapter = _adapter(annotation)
    if adapter is None:
        return value
    from pydantic import ValidationError

    try:
        return adapter.validate_python(value)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = "".join(f"[{part!r}]" for part in error.get("loc", ()))
        raise ConfigError(
            key,
            f"expects {_type_name(annotation)}, got {value!r}"
            f"{' (at ' + where + ')' if where else ''}: {error['msg']}",
        ) from None


@functools.lru_cache(maxsize=512)
def _adapter(annotation: Any) -> Any:
    """pydantic's validator of `annotation` (imported on first use), None where it has none."""
    from pydantic import ConfigDict, PydanticSchemaGenerationError, TypeAdapter

    try:
        return TypeAdapter(annotation, config=ConfigDict(arbitrary_types_allowed=True))
    except (PydanticSchemaGenerationError, TypeError):
        return None


def _type_name(annotation: Any) -> str:
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "").replace("collections.abc.", "")


def _field_hints(cls: type) -> dict[str, Any]:
    """The resolved annotations of a typed config node's fields."""
    try:
        return typing.get_type_hints(cls)
    except Exception:
        return {}


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
        else:
            hints = _field_hints(type(base))  # type: ignore[arg-type]
            value = annotated_value(key, hints.get(key), value)
        changes[key] = value
    return dataclasses.replace(base, **changes)  # type: ignore[type-var]


def typed_keywords(cls: type, keywords: Mapping[str, Any]) -> dict[str, Any]:
    """`keywords` of the settings dataclass `cls`, each read as its field's annotation reads it;
    an unknown key or a value its type refuses raises ConfigError naming the key (relative to
    the node) and, for an unknown one, its nearest field."""
    init = [f for f in dataclasses.fields(cls) if f.init]  # type: ignore[arg-type]
    known = [f.name for f in init]
    hints = _field_hints(cls)
    out = {}
    for key, value in keywords.items():
        if key not in known:
            raise ConfigError(
                key,
                f"unknown key; {nearest_hint(key, known)} ({cls.__qualname__} takes "
                f"{', '.join(known) or 'no keyword arguments'})",
            )
        out[key] = annotated_value(key, hints.get(key), value)
    required = [
        f.name
        for f in init
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    missing = [name for name in required if name not in keywords]
    if missing:
        raise ConfigError(
            missing[0], f"missing: {cls.__qualname__} needs {', '.join(missing)}"
        )
    return out


def node_of(target: str, settings: object) -> dict[str, Any]:
    """A shipped plug-in's config node: its class and every keyword argument with its default
    (what `--cfg job` shows, and what an outside plug-in copies)."""
    return {"_target_": target, **dataclasses.asdict(settings)}  # type: ignore[call-overload]


def field_flag(f: dataclasses.Field[Any]) -> str:
    """The command-line flag of a settings field: `--timeout-s` for timeout_s, or the flag its
    metadata names (`metadata={"flag": "--judge"}`), for a tool whose flags are a dataclass's
    fields (`run.typed_options`)."""
    return str(f.metadata.get("flag", "--" + f.name.replace("_", "-")))
