"""What the benchmark scripts share: one timed call, and a `--rounds` option that refuses a
count below 1 by name (a median of no rounds is a statistics traceback, not a figure)."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import TypeVar

_Value = TypeVar("_Value")


def timed(fn: Callable[[], _Value]) -> tuple[_Value, float]:
    """`fn()` and the wall seconds it took."""
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def at_least_one(text: str) -> int:
    """An argparse `type`: a count of 1 or more."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def add_rounds(parser: argparse.ArgumentParser, default: int, help: str = "timed rounds") -> None:
    """`--rounds N` (N >= 1; argparse exits 2 naming the option otherwise)."""
    parser.add_argument("--rounds", type=at_least_one, default=default, help=help)
