"""Run a benchmark script of benchmarks/ end to end and read its RESULT line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def result_line(out: str, name: str) -> str:
    [line] = [x for x in out.splitlines() if x.startswith(f"RESULT {name}:")]
    return line


def run_benchmark(script: str, *args: str, timeout: int = 300) -> str:
    """benchmarks/<script> <args> from the repository root; its stdout (it must exit 0)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout
