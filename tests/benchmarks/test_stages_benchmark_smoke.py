"""benchmarks/bench_stages.py end to end on a tiny size: its RESULT line's contract check (every
context within the budget and the per-document cap) is asserted, its timings never."""

from __future__ import annotations

import re

import pytest
from conftest import run_benchmark
from support.benchmarks import result_line

pytestmark = pytest.mark.slow


def test_stages_benchmark_quick() -> None:
    out = run_benchmark("bench_stages.py", "--quick", "--synthetic")
    line = result_line(out, "stages")
    match = re.search(r"within budget and cap (\d+)/(\d+)$", line)
    assert match, line
    assert match[1] == match[2] == "50"
