"""A command's flags generated from a settings dataclass, so a setting the app reads from its
Hydra config and a tool reads from its command line is written once: one flag per field
(`timeout_s` is `--timeout-s`, or the flag the field's metadata names), its type and default
the field's, its help the field's attribute docstring (the first sentence), grouped by the
field's `metadata["judges"]`. `read_fields` builds the dataclass back from the parsed flags."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import itertools
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from retrieval_bench.config.typed import field_flag

T = TypeVar("T")


def attribute_docs(cls: type) -> dict[str, str]:
    """Each field's attribute docstring (the string literal below it), first sentence."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            tree = ast.parse(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for node, after in itertools.pairwise(body):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                text = " ".join(after.value.value.split())
                out[node.target.id] = text.split(". ")[0].rstrip(".")
    return out


def _parts(hint: Any) -> tuple[Any, bool]:
    """(the type a value converts to, whether None is allowed) of an annotation."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return args[0], True
    return hint, False


def _converter(hint: Any) -> tuple[Callable[[str], Any], bool]:
    """(argparse type, whether the value is a comma-separated list)."""
    base, _ = _parts(hint)
    if typing.get_origin(base) is list:
        (item,) = typing.get_args(base)

        def items(text: str) -> list[Any]:
            try:
                return [item(part.strip()) for part in text.split(",") if part.strip()]
            except ValueError:
                raise argparse.ArgumentTypeError(
                    f"{text!r}: expected {item.__name__} values separated by commas"
                ) from None

        return items, True
    if base is bool:
        return lambda text: text.lower() in ("1", "true", "yes"), False
    return base, False


def add_fields(
    parser: argparse.ArgumentParser,
    cls: type,
    required: Sequence[str] = (),
    exclude: Sequence[str] = (),
    choices: dict[str, Sequence[str]] | None = None,
    converters: dict[str, Callable[[str], Any]] | None = None,
) -> None:
    """One flag per field of the dataclass `cls` (but `exclude`); `required`: fields whose flag
    must be given; `choices`: a field's allowed values on the command line (default its
    metadata's); `converters`: a field's own argparse type (default from its annotation)."""
    hints = typing.get_type_hints(cls)
    docs = attribute_docs(cls)
    groups: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name in exclude:
            continue
        title = f.metadata.get("judges")
        target: Any = parser
        if title:
            if title not in groups:
                groups[title] = parser.add_argument_group(f"--judge {title.replace(', ', ' or ')}")
            target = groups[title]
        convert, is_list = _converter(hints[f.name])
        convert = (converters or {}).get(f.name, convert)
        options: dict[str, Any] = {"dest": f.name, "help": docs.get(f.name)}
        allowed = (choices or {}).get(f.name, f.metadata.get("choices"))
        if f.metadata.get("repeat"):
            item = typing.get_args(_parts(hints[f.name])[0])[0]
            options |= {"action": "append", "type": item, "default": None}
        else:
            options |= {"type": convert, "default": _default(f)}
            if allowed:
                options["choices"] = list(allowed)
        if f.name in required:
            options["required"] = True
        if is_list and not f.metadata.get("repeat"):
            options["metavar"] = "A,B"
        target.add_argument(field_flag(f), **options)


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


def read_fields(args: argparse.Namespace, cls: type[T]) -> T:
    """The dataclass `cls` from parsed flags: a repeatable flag not given keeps the field's
    default."""
    given = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(cls)  # type: ignore[arg-type]
        if getattr(args, f.name, None) is not None
    }
    return cls(**given)
