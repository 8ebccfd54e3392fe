"""What the benchmark scripts share: one timed call, engines interleaved query by query, and a
`--rounds` option that refuses a count below 1 by name (a median of no rounds is a statistics
traceback, not a figure)."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

_Value = TypeVar("_Value")
_Query = TypeVar("_Query")


def timed(fn: Callable[[], _Value]) -> tuple[_Value, float]:
    """`fn()` and the wall seconds it took."""
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def interleaved(
    engines: dict[str, Callable[[_Query], Any]], queries: Sequence[_Query], rounds: int
) -> dict[str, list[float]]:
    """Seconds per query and engine: the engines take turns on each query, `rounds` times,
    and each (engine, query) keeps its fastest time (a loaded machine's pauses fall on one
    turn, not on one engine)."""
    best = {name: [float("inf")] * len(queries) for name in engines}
    for _ in range(rounds):
        for i, query in enumerate(queries):
            for name, fn in engines.items():
                start = time.perf_counter()
                fn(query)
                best[name][i] = min(best[name][i], time.perf_counter() - start)
    return best


def at_least_one(text: str) -> int:
    """An argparse `type`: a count of 1 or more."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def add_rounds(parser: argparse.ArgumentParser, default: int, help: str = "timed rounds") -> None:
    """`--rounds N` (N >= 1; argparse exits 2 naming the option otherwise)."""
    parser.add_argument("--rounds", type=at_least_one, default=default, help=help)
