"""The one plug-in convention: a config node names a class by `_target_` (anywhere on the path,
not only in this package, or by the name an installed package gives it: `entry_points`) and its
other keys are that class's keyword arguments, checked against the class's typed node, so a
typo fails naming the key and its nearest known name before any work. Arms, combiners, stages
and encoders are all built this way.

It is also the plug-in boundary: an exception raised inside a plug-in whose class lives outside
this package (its `__init__`, `build`, `check`, `active`, `search`, `apply`, `combine`, `info`,
an encoder's `identity`, `dimension`, `encode_*`), a built object without its protocol's
methods, or an `info()` that is not JSON is that plug-in's failure: `PluginError` (exit 2)
naming the plug-in, the method and its message. The same inside a class of this package is
this project's bug and keeps its traceback (exit 3)."""

from __future__ import annotations

import importlib
import inspect
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from omegaconf import OmegaConf

from retrieval_bench import entry_points
from retrieval_bench.config.typed import annotated_value, with_overrides
from retrieval_bench.errors import BenchError, ConfigError, nearest_hint
from retrieval_bench.io.strict_json import strict_dumps

__all__ = [
    "PluginError",
    "annotated_value",
    "checked_info",
    "guarded_call",
    "instantiate_plugin",
    "locate",
    "with_overrides",
]

T = TypeVar("T")
PACKAGE = "retrieval_bench."


class PluginError(BenchError):
    """A plug-in from outside this package raised inside one of its methods, or gave back what
    its protocol forbids: its failure, named with its class and method (module doc)."""


def plugin_class(component: object) -> type:
    """`component` itself when it is a class, else its class."""
    return component if isinstance(component, type) else type(component)


def is_builtin(component: object) -> bool:
    """Whether `component` (an object or a class) is one of this package's own."""
    return plugin_class(component).__module__.startswith(PACKAGE)


def plugin_name(component: object) -> str:
    """`module.Class` of the plug-in, as its `_target_` names it."""
    cls = plugin_class(component)
    return f"{cls.__module__}.{cls.__qualname__}"


def guarded_call(what: str, component: object, call: Callable[..., T], *args: Any) -> T:
    """`call(*args)`, a method of `component`; an exception raised by an outside plug-in becomes
    a PluginError naming it (`what`: "arm 'x'", "stage 'y'"), the method and the message; one
    raised by a built-in propagates as the bug it is, as does any BenchError (already named)."""
    try:
        return call(*args)
    except BenchError:
        raise
    except Exception as exc:
        if is_builtin(component):
            raise
        method = "__init__" if isinstance(call, type) else getattr(call, "__name__", "call")
        raise PluginError(
            f"{what}: {plugin_name(component)}.{method}() raised {type(exc).__name__}: {exc}"
        ) from exc


def require_methods(
    what: str, maker: object, built: object, kind: str, methods: Sequence[str]
) -> None:
    """PluginError when `built` (what `maker`'s build returned) lacks a method of its protocol
    (`kind`: "Arm", "Stage", "Combiner"), before anything calls it."""
    missing = [m for m in methods if not callable(getattr(built, m, None))]
    if missing:
        raise PluginError(
            f"{what}: {plugin_name(maker)}.build() returned {type(built).__qualname__}, which "
            f"has no {missing[0]}() method ({'an' if kind[0] in 'AEIOU' else 'a'} {kind} has "
            f"{', '.join(f'{m}()' for m in methods)}; see retrieval_bench.protocols)"
        )


def checked_info(what: str, component: object) -> dict[str, Any]:
    """`component.info()`, guarded, which the manifest writes: a mapping that is JSON, else a
    PluginError naming the plug-in (a built-in's is a bug and propagates)."""
    info = guarded_call(what, component, component.info)  # type: ignore[attr-defined]
    try:
        if not isinstance(info, Mapping):
            raise TypeError(f"returned {type(info).__name__}, not a mapping")
        strict_dumps(info)
    except (TypeError, ValueError) as exc:
        if is_builtin(component):
            raise
        raise PluginError(
            f"{what}: {plugin_name(component)}.info() is not JSON, which the manifest "
            f"records ({exc})"
        ) from exc
    return dict(info)


def locate(key: str, target: object, known: Sequence[str] = (), kind: str | None = None) -> type:
    """The class `target` names: a dotted path, or (with `kind`, a key of
    `entry_points.GROUPS`) the name an installed package gives it. ConfigError naming `key` when
    it is not a string, its module does not import, or the module has no such class, with the
    nearest name: among the module's classes when the module imports, else among `known` (the
    built-ins); for a name, among the installed names."""
    if kind is not None and entry_points.is_name(target):
        found = entry_points.load(key, kind, str(target))
        if not isinstance(found, type):
            raise ConfigError(
                key,
                f"the installed plug-in {target!r} is {type(found).__name__} {found!r}, not a "
                f"class (its entry point in {entry_points.GROUPS[kind]} names module:Class)",
            )
        return found
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


def _check_keywords(key: str, cls: type, keywords: Mapping[str, Any]) -> dict[str, Any]:
    """Each keyword must be a parameter of `cls` (its typed node): an unknown one is refused
    naming `key.<keyword>` and its nearest parameter, a value its annotation refuses naming
    `key.<keyword>` and the type, a required parameter left out naming it. Returns the keywords
    as the annotations read them (`annotated_value`). A class taking **kwargs checks those
    itself (the built-in specs check them against their config node with `with_overrides`)."""
    try:
        parameters = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return dict(keywords)
    hints = _init_hints(cls)
    names = [
        name for name, p in parameters.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    checked = {}
    for keyword, given in keywords.items():
        value = OmegaConf.to_container(given, resolve=True) if OmegaConf.is_config(given) else given
        if keyword not in names:
            if takes_any:
                checked[keyword] = value
                continue
            raise ConfigError(
                f"{key}.{keyword}",
                f"unknown key; {nearest_hint(keyword, names)} ({cls.__qualname__} takes "
                f"{', '.join(names) or 'no keyword arguments'})",
            )
        checked[keyword] = annotated_value(f"{key}.{keyword}", hints.get(keyword), value)
    missing = [
        name
        for name, p in parameters.items()
        if p.default is p.empty
        and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        and name not in keywords
    ]
    if missing:
        raise ConfigError(
            f"{key}.{missing[0]}",
            f"missing: {cls.__qualname__} needs {', '.join(missing)} (set {key}.{missing[0]})",
        )
    return checked


def _init_hints(cls: type) -> dict[str, Any]:
    """The resolved annotations of `cls.__init__`'s parameters; a name that does not resolve
    (imported only for type checkers) leaves its parameter unchecked."""
    try:
        return typing.get_type_hints(cls.__init__)  # type: ignore[misc]
    except Exception:
        return {}


def instantiate_plugin(
    key: str,
    node: Mapping[str, Any],
    kind: str,
    methods: Sequence[str],
    known: Sequence[str] = (),
    group: str | None = None,
) -> Any:
    """The plug-in the config node at `key` (`arms.bm25`, `stages.rerank`, ...) names: its
    `_target_` class built with the node's other keys. A class that cannot be found, a keyword
    the class does not take, a spec's own refusal of a value, or a class without the `methods`
    of its protocol (`kind`, e.g. "StageSpec") fails as a ConfigError naming the key under
    `key`. `known`: the built-in targets of this kind, for the nearest-name hint; `group`: the
    plug-in kind whose installed names `_target_` may give (`entry_points.GROUPS`)."""
    target = node.get("_target_")
    cls = locate(f"{key}._target_", target, known, group)
    keywords = _check_keywords(key, cls, {k: v for k, v in node.items() if k != "_target_"})
    missing = [m for m in methods if not callable(getattr(cls, m, None))]
    if missing:
        raise ConfigError(
            f"{key}._target_",
            f"{target} is not a {kind}: it has no {missing[0]}() method "
            f"(a {kind} has {', '.join(f'{m}()' for m in methods)}; see retrieval_bench.protocols)",
        )
    try:
        # A nested node is the plug-in's own keyword (a dense arm's `encoder` overrides,
        # `_target_` included), applied to its typed node by the plug-in itself.
        return cls(**keywords)
    except ConfigError as error:
        raise ConfigError(f"{key}.{error.key}", error.message) from error
    except BenchError:
        raise
    except Exception as exc:
        if is_builtin(cls):
            raise  # this package's own spec: a bug (exit 3)
        raise ConfigError(
            key, f"{plugin_name(cls)}.__init__() raised {type(exc).__name__}: {exc}"
        ) from exc
