"""Data flows one way: records at the bottom, then scoring and reports, then the pipeline and
the job, then compare, the monthly benchmark and the app. A lower layer never imports a higher
one (checked on the source, imports inside functions included)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import ROOT

SRC = ROOT / "src" / "retrieval_bench"

# What each part may not import (module prefixes under retrieval_bench).
ORCHESTRATION = [
    "pipeline",
    "experiment",
    "outputs",
    "compare",
    "benchmark",
    "api",
    "router",
    "arms",
]
ABOVE = {
    "data": [*ORCHESTRATION, "scoring", "reports", "rankings", "job_result"],
    "scoring": [*ORCHESTRATION, "reports", "job_result"],
    "reports": ORCHESTRATION,
    "rankings": [*ORCHESTRATION, "scoring", "reports", "job_result"],
    "components": [*ORCHESTRATION, "scoring", "reports", "job_result"],
    # The schema holds the compare and benchmark nodes (compare.config, benchmark.config).
    "config": ["pipeline", "experiment", "outputs", "api", "arms"],
}


def imported_modules(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
    return [n.removeprefix("retrieval_bench.") for n in names if n.startswith("retrieval_bench.")]


def files_of(part: str) -> list[Path]:
    folder = SRC / part
    return sorted(folder.rglob("*.py")) if folder.is_dir() else [SRC / f"{part}.py"]


@pytest.mark.parametrize("part", sorted(ABOVE))
def test_no_layer_imports_one_above_it(part: str) -> None:
    offending = []
    for path in files_of(part):
        for module in imported_modules(path):
            top = module.split(".")[0]
            if top in ABOVE[part]:
                offending.append(f"{path.relative_to(ROOT)} imports retrieval_bench.{module}")
    assert not offending, "\n".join(offending)
