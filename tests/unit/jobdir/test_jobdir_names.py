"""The job-folder module owns every file name (issue #19 item 4): no module outside
`retrieval_bench.jobdir` spells a file name of a job, sweep or month folder
(`retrieval_bench.jobdir.names`); it takes the name from there, or is given the path.

Checked on the source: every string literal outside a docstring that is one of the names, a
path holding one (`"trec/final.run"`, `f"{x}/metrics.json"`), a path segment (`job_dir /
"plots"`) or holding one of the name templates (`f"comparison-{name}.html"`, a link
`f"![trend](trend-{name}.png)"`). Prose that mentions a
file in a message (`"... (manifest.json has no labels.hash)"`) is not a path and is left alone.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from conftest import ROOT

from retrieval_bench.jobdir import names

SRC = ROOT / "src"
OWNER = SRC / "retrieval_bench" / "jobdir"

_VALUES = [v for k, v in vars(names).items() if k.isupper() and isinstance(v, str)]
_VALUES += list(names.PLOT_FILES.values())
TEMPLATES = {v for v in _VALUES if "{}" in v}
PATHS = {v for v in _VALUES if "{}" not in v}
# Every segment of every name. "baselines" (trec/baselines) is left out: it is also
# metrics.json's key for a router's baselines, and results.csv's `baselines/<name>` stage.
SEGMENTS = {part for v in PATHS for part in v.split("/") if part} - {"baselines"}
# A literal that is a whole name on its own must look like a file (a dot, or the marker's
# capitals): "plots" and "trec" are also JSON keys and formats, named only as path segments.
FILE_LIKE = {v for v in PATHS if "." in v or v.isupper()} | {
    s for s in SEGMENTS if "." in s or s.isupper()
}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _path_operands(tree: ast.AST) -> set[int]:
    """The string literals used as an operand of `/` (a path segment)."""
    return {
        id(side)
        for node in ast.walk(tree)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)
        for side in (node.left, node.right)
        if isinstance(side, ast.Constant) and isinstance(side.value, str)
    }


def _suffix_arguments(tree: ast.AST) -> set[int]:
    """The string literals passed to `.with_suffix(...)`: an extension (`.lock`), not a name."""
    return {
        id(arg)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "with_suffix"
        for arg in node.args
    }


def _template(node: ast.JoinedStr) -> str:
    return "".join(part.value if isinstance(part, ast.Constant) else "{}" for part in node.values)


def spelt_names(path: Path) -> Iterator[tuple[int, str]]:
    """(line, literal) of every file name `path` spells."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip, segments = _docstrings(tree) | _suffix_arguments(tree), _path_operands(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr) and any(t in _template(node) for t in TEMPLATES):
            found.append((node.lineno, _template(node)))
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
            continue
        if id(node) in skip:
            continue
        value = node.value
        parts = [p for p in value.split("/") if p]
        if (
            value in FILE_LIKE
            or ("/" in value and any(p in SEGMENTS for p in parts))
            or (id(node) in segments and any(p in SEGMENTS for p in parts))
        ):
            found.append((node.lineno, value))
    yield from sorted(found)


def offending() -> list[str]:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if path.is_relative_to(OWNER):
            continue
        for line, literal in spelt_names(path):
            found.append(f"{path.relative_to(ROOT)}:{line}: {literal!r}")
    return found


def test_no_module_outside_jobdir_spells_a_folder_file_name() -> None:
    found = offending()
    assert not found, "take these names from retrieval_bench.jobdir.names:\n" + "\n".join(found)


def test_the_scan_finds_each_kind_of_spelling(tmp_path: Path) -> None:
    """The check itself: each way of spelling a name is found, prose and keys are not."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        '"""A docstring naming metrics.json."""\n'
        'a = job / "metrics.json"\n'
        'b = job / "plots"\n'
        'c = "trec/final.run"\n'
        'd = f"comparison-{name}.html"\n'
        'e = f"{job}/UNFINISHED"\n'
        'f = {"plots": 1, "baselines": 2}\n'
        'g = f"{job}: no report.md written"\n'
        'h = f"baselines/{name}"\n'
        'i = f"![trend](trend-{name}.png)"\n',
        encoding="utf-8",
    )
    assert [line for line, _ in spelt_names(sample)] == [2, 3, 4, 5, 6, 10]


def test_every_figure_kind_has_its_file() -> None:
    """`reports.plots` draws figures by kind; the job folder names one file per kind."""
    from retrieval_bench.reports.plots import FIGURES

    assert sorted(names.PLOT_FILES) == sorted(FIGURES)
    assert all(p.startswith(f"{names.PLOTS_DIR}/") for p in names.PLOT_FILES.values())
