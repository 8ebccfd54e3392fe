"""Data flows one way (ARCHITECTURE.md): every package of `retrieval_bench` has a layer, and a
module imports only its own package and packages of lower layers. Checked on the source, with
imports inside functions and under TYPE_CHECKING counted, so a cycle cannot hide at run time;
and no two modules import each other, directly or through others."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT

SRC = ROOT / "src"
PACKAGE = "retrieval_bench"

# Bottom to top; the packages (or root modules) of one row never import each other.
LAYERS: list[tuple[str, ...]] = [
    ("errors", "paths"),
    ("io", "progress", "compiled", "http_json"),
    ("records", "tiebreak"),
    ("config",),
    ("stats",),
    ("data",),
    ("protocols",),
    ("plugins",),
    ("text",),
    ("encoders",),
    ("retrievers", "fusion", "stages"),
    ("scoring",),
    ("routing",),
    ("perturb",),
    ("job",),
    ("reports",),
    ("jobdir",),
    ("answers",),
    ("labels",),
    ("judge",),
    ("compare",),
    ("tune",),
    ("benchmark",),
    ("api",),
]
RANK = {part: rank for rank, row in enumerate(LAYERS) for part in row}


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    found = {}
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imports(path: Path) -> Iterator[str]:
    """Every `retrieval_bench...` name imported anywhere in the file (functions and
    TYPE_CHECKING blocks included), as written: a module or a name inside one."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                yield f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


def target(name: str, known: dict[str, Path]) -> str | None:
    """The module `name` (a module, or a name inside one) resolves to; None outside."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def part_of(module: str) -> str:
    """The layer part a module belongs to: its top-level package or root module."""
    return module.split(".")[1] if "." in module else ""


@functools.cache
def graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports. Built when a test first asks, not at
    collection: parsing the whole package costs every xdist worker ~0.7 s otherwise."""
    known = modules()
    return {
        module: {
            t for name in imports(path) if (t := target(name, known)) is not None and t != module
        }
        for module, path in known.items()
    }


def test_every_package_and_root_module_has_a_layer() -> None:
    parts = {part_of(m) for m in graph() if m != PACKAGE}
    assert sorted(parts - set(RANK)) == []
    assert sorted(set(RANK) - parts) == []


@pytest.mark.parametrize("part", sorted(RANK))
def test_no_module_imports_a_layer_above_or_beside_it(part: str) -> None:
    offending = []
    for module, imported in graph().items():
        if part_of(module) != part:
            continue
        for other in sorted(imported):
            other_part = part_of(other)
            if other == PACKAGE or other_part == part:
                continue
            if RANK[other_part] >= RANK[part]:
                offending.append(f"{module} imports {other} (layer of {other_part})")
    assert not offending, "\n".join(offending)


def test_the_package_root_imports_nothing_at_load() -> None:
    """`retrieval_bench/__init__.py` names its exports lazily: importing the package (or its
    config schema) loads no implementation."""
    tree = ast.parse((SRC / PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    loaded = [
        node
        for node in tree.body
        if isinstance(node, (ast.Import, ast.ImportFrom))
        and (
            node.module if isinstance(node, ast.ImportFrom) else node.names[0].name or ""
        ).startswith(PACKAGE)
    ]
    assert loaded == []


def test_no_import_cycle_between_modules() -> None:
    """Tarjan's strongly connected components over the module graph: every one is a single
    module (a package importing its own submodules is no cycle unless they import it back)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph()[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in graph():
        if node not in index:
            visit(node)
    assert cycles == []


def test_the_app_is_above_the_library() -> None:
    """Nothing in the library imports the Hydra app (`src/run`)."""
    offending = [
        f"{module} imports {name}"
        for module, path in modules().items()
        for name in imports(path)
        if name == "run" or name.startswith("run.")
    ]
    assert offending == []
