"""A benchmark script's RESULT line (`conftest.run_benchmark` runs the script)."""

from __future__ import annotations


def result_line(out: str, name: str) -> str:
    [line] = [x for x in out.splitlines() if x.startswith(f"RESULT {name}:")]
    return line
