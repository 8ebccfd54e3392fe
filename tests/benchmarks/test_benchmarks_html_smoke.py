"""benchmarks/bench_html.py runs end to end on a tiny sweep: its RESULT line's size and console
error count are checked, its timings never (they flake on shared machines). Subprocess: slow."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import run_benchmark
from support.benchmarks import result_line

pytestmark = pytest.mark.slow


def test_html_benchmark_quick(tmp_path: Path) -> None:
    out = run_benchmark("bench_html.py", "--quick", "--workdir", str(tmp_path))
    line = result_line(out, "html")
    size = re.search(r"comparison\.html (\S+) MB \(budget 5 MB\)", line)
    assert size and float(size[1]) < 5.0, line
    if "no Chromium" not in line:
        assert line.endswith("console errors 0"), line
