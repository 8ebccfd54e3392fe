"""Each benchmark script runs end to end on a tiny size and prints its side-by-side ratios.

Only that it runs and reports: timings are never asserted (they flake on shared machines).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_benchmark(script: str, *args: str) -> str:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_bm25_benchmark_quick() -> None:
    out = run_benchmark("bench_bm25.py", "--quick", "--synthetic")
    assert "RESULT bm25:" in out and "x faster" in out
    assert "max |score diff| 0 " in out, "the sparse scorer must stay bit-identical"


def test_scorer_benchmark_quick() -> None:
    pytest.importorskip("pytrec_eval")
    out = run_benchmark("bench_scorer.py", "--quick", "--no-ranx")
    assert "RESULT scorer:" in out and "x faster" in out


def test_scale_benchmark_quick() -> None:
    out = run_benchmark("bench_scale.py", "--quick")
    assert "RESULT scale bm25:" in out and "RESULT scale dense:" in out
    assert "growth" in out


def test_sweep_benchmark_quick() -> None:
    out = run_benchmark(
        "bench_sweep.py", "--quick", "--values", "10", "--no-compare-run", "--repeat", "1"
    )
    assert "RESULT sweep:" in out and "x one job" in out
