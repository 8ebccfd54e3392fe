"""Plug-ins an installed package offers by name, through Python entry points.

A package declares its plug-ins under one entry-point group per kind (`GROUPS`), in its
`pyproject.toml`:

    [project.entry-points."retrieval_bench.arms"]
    my_bm25 = "my_package.arms:MyArmSpec"

    [project.entry-points."retrieval_bench.measures"]
    my_metrics = "my_package.metrics"

and a config names it where it names a class: `arms.mine._target_=my_bm25`. A `_target_` with a
dot stays a class path (`my_module.MyClass`), so an entry-point name is one without a dot. An
arm, combiner, stage or encoder entry point names a class (`module:Class`); a measures entry
point names a module whose import registers its measures (`scoring.registry.register_measure`),
loaded by `scoring.plugins=[my_metrics]`. `python -m run.plugins` lists what is installed,
beside the built-ins.

Found with `importlib.metadata.entry_points` over `sys.path` when a name is asked for, so a
package installed (or a folder put on the path) after start is found too. Nothing is loaded
that a config does not name: an installed package never changes a job by being installed.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from importlib import metadata
from typing import Any

from retrieval_bench.errors import ConfigError, nearest_hint

# Plug-in kind -> its entry-point group.
GROUPS: dict[str, str] = {
    "arms": "retrieval_bench.arms",
    "combiners": "retrieval_bench.combiners",
    "stages": "retrieval_bench.stages",
    "encoders": "retrieval_bench.encoders",
    "measures": "retrieval_bench.measures",
}
# An entry-point name as a config may give it (no dot: that is a class or module path).
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


@dataclass(frozen=True)
class Installed:
    """One plug-in an installed distribution offers: its kind, name, the object its entry point
    names (`module:attribute`, or a module) and the distribution it comes from."""

    kind: str
    name: str
    value: str
    origin: str


def is_name(target: object) -> bool:
    """Whether `target` reads as an entry-point name rather than a dotted path."""
    return isinstance(target, str) and bool(_NAME.match(target))


def _origin(entry: metadata.EntryPoint) -> str:
    dist = getattr(entry, "dist", None)
    return f"{dist.name} {dist.version}" if dist is not None else "unknown distribution"


def _entries(kind: str) -> list[metadata.EntryPoint]:
    return list(metadata.entry_points(group=GROUPS[kind]))


def installed(kind: str | None = None) -> list[Installed]:
    """Every plug-in installed under the groups (or under `kind`'s), by kind then name."""
    kinds = [kind] if kind is not None else list(GROUPS)
    found = [
        Installed(k, entry.name, entry.value, _origin(entry))
        for k in kinds
        for entry in _entries(k)
    ]
    return sorted(found, key=lambda p: (list(GROUPS).index(p.kind), p.name, p.origin))


def names(kind: str) -> list[str]:
    """The names installed under `kind`'s group, sorted."""
    return sorted({entry.name for entry in _entries(kind)})


def load(key: str, kind: str, name: str) -> Any:
    """What the entry point `name` of `kind`'s group names, imported. ConfigError naming `key`
    when none is installed under that name (with the nearest installed name), when two
    distributions offer it, or when importing it fails."""
    group = GROUPS[kind]
    matches = [entry for entry in _entries(kind) if entry.name == name]
    if not matches:
        known = names(kind)
        hint = nearest_hint(name, known) if known else "none is installed"
        raise ConfigError(
            key,
            f"no installed plug-in named {name!r} in the entry-point group {group} ({hint}); "
            "a class path such as my_module.MyClass also works (python -m run.plugins lists "
            "what is installed)",
        )
    origins = sorted({_origin(entry) for entry in matches})
    if len(origins) > 1:
        raise ConfigError(
            key,
            f"{name!r} is offered by more than one installed package in {group} "
            f"({', '.join(origins)}); name the class by its path instead",
        )
    entry = matches[0]
    try:
        return entry.load()
    except Exception as exc:
        raise ConfigError(
            key,
            f"cannot load {name!r} ({entry.value}, from {origins[0]}): "
            f"{type(exc).__name__}: {exc}",
        ) from exc


def named_in(config: Mapping[str, Any]) -> list[dict[str, str]]:
    """The installed plug-ins a job's config (as the manifest records it) names, each with
    its kind, name, object and distribution: what a reader needs to know which release of a
    plug-in package the job ran with. A measures name that an importable module has is that
    module's, not an entry point's (`scoring.registry.load_plugins`)."""
    wanted: list[tuple[str, str]] = []
    for kind in ("arms", "combiners", "stages"):
        for node in (config.get(kind) or {}).values():
            if isinstance(node, Mapping) and is_name(node.get("_target_")):
                wanted.append((kind, str(node["_target_"])))
    encoder = (config.get("encoder") or {}).get("_target_")
    if is_name(encoder):
        wanted.append(("encoders", str(encoder)))
    for module in (config.get("scoring") or {}).get("plugins") or []:
        if is_name(module) and not importable(module):
            wanted.append(("measures", module))
    if not wanted:
        return []
    found = {(p.kind, p.name): p for p in installed()}
    return [asdict(found[key]) for key in dict.fromkeys(wanted) if key in found]


def importable(module: str) -> bool:
    """Whether a top-level module of that name is on the path (found, not imported)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False
