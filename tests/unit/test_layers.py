"""Data flows one way (ARCHITECTURE.md): every package of `retrieval_bench` has a layer, and a
module imports only its own package and packages of lower layers. Checked on the source, with
imports inside functions and under TYPE_CHECKING counted, so a cycle cannot hide at run time;
and no two modules import each other, directly or through others. The library never imports
the app (`src/run`), nor starts it as a process (`python -m run ...`), a dependency no import
shows.

`python tests/unit/test_layers.py` prints the import graph's figures (modules, package nodes,
edges, cycles, imports upward or beside)."""

from __future__ import annotations

import ast
import functools
import itertools
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

# The repository root (not conftest's: `python tests/unit/test_layers.py` runs without it).
ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
PACKAGE = "retrieval_bench"

# Bottom to top; the packages (or root modules) of one row never import each other.
LAYERS: list[tuple[str, ...]] = [
    ("errors", "paths"),
    ("io", "progress", "compiled", "http_json", "entry_points"),
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
    ("active",),
    ("compare",),
    ("tune",),
    ("tracking",),
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


# A shell command that runs the app (`python -m run`, `python3 -m run.score`, ...).
_APP_COMMAND = re.compile(r"(^|\s)-m\s+run(\.\w+)*(\s|$)")
# Calls that start a process from a command line (a shell string or an argv).
_PROCESS_CALLS = {
    "run", "Popen", "call", "check_call", "check_output", "getoutput", "getstatusoutput",
    "system", "popen", "create_subprocess_exec", "create_subprocess_shell",
}  # fmt: skip


def _is_app_module(node: ast.expr | None) -> bool:
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and (node.value == "run" or node.value.startswith("run."))
    )


def app_starts(source: str) -> list[int]:
    """Lines where `source` would start the app as a process: an argument list holding `-m`
    then `run` (or `run.<command>`), a process call given a shell command `... -m run ...`, or
    runpy running the `run` package. Text that merely names a command (a docstring, an error's
    hint) starts nothing and is not counted."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        items: list[ast.expr] = []
        if isinstance(node, (ast.List, ast.Tuple)):
            items = list(node.elts)
        elif isinstance(node, ast.Call):
            items = list(node.args)
            name = (
                node.func.attr
                if isinstance(node.func, ast.Attribute)
                else (node.func.id if isinstance(node.func, ast.Name) else "")
            )
            command = items[0] if items else None
            if (
                name in _PROCESS_CALLS
                and isinstance(command, ast.Constant)
                and isinstance(command.value, str)
                and _APP_COMMAND.search(command.value)
            ):
                lines.append(node.lineno)
            if name in ("run_module", "run_path") and _is_app_module(command):
                lines.append(node.lineno)
        for flag, module in itertools.pairwise(items):
            if isinstance(flag, ast.Constant) and flag.value == "-m" and _is_app_module(module):
                lines.append(flag.lineno)
    return sorted(set(lines))


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ('cmd = [sys.executable, "-m", "run", "-m", *overrides]', [1]),
        ('subprocess.Popen((python, "-m", "run.score", qrels))', [1]),
        ('subprocess.run("python -m run experiment=monthly", shell=True)', [1]),
        ('os.system("python3 -m run.compare out")', [1]),
        ('runpy.run_module("run", run_name="__main__")', [1]),
        ('"""Run it: `python -m run experiment=monthly`."""', []),
        ('raise ConfigError("k", "see python -m run.pool --import")', []),
        ('subprocess.run([sys.executable, "-m", "pip", "install", "run"])', []),
    ],
)
def test_app_starts_finds_what_starts_the_app_and_nothing_else(
    source: str, found: list[int]
) -> None:
    assert app_starts(source) == found


def test_the_library_never_starts_the_app() -> None:
    """The library plans and returns data; launching `python -m run` (the monthly benchmark's
    sweeps) is the app's (`run.monthly`)."""
    offending = [
        f"{module} line {line} starts the app"
        for module, path in modules().items()
        for line in app_starts(path.read_text(encoding="utf-8"))
    ]
    assert offending == []


def figures() -> dict[str, int]:
    """The import graph's figures: modules (a package counts as its `__init__`), package nodes,
    import edges between modules, cycles (strongly connected components of more than one
    module) and imports of a layer above or beside the importer's."""
    known = modules()
    edges = graph()
    upward = sum(
        1
        for module, imported in edges.items()
        for other in imported
        if module != PACKAGE
        and other != PACKAGE
        and part_of(other) != part_of(module)
        and RANK[part_of(other)] >= RANK[part_of(module)]
    )
    try:
        test_no_import_cycle_between_modules()
        cycles = 0
    except AssertionError:
        cycles = 1
    return {
        "modules": len(known),
        "package_nodes": sum(1 for path in known.values() if path.name == "__init__.py"),
        "edges": sum(len(imported) for imported in edges.values()),
        "layer_parts": len({part_of(m) for m in known if m != PACKAGE}),
        "cycles": cycles,
        "upward_imports": upward,
    }


if __name__ == "__main__":
    print(" ".join(f"{name}={value}" for name, value in figures().items()))
