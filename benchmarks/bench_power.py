"""A comparison's power entries through scipy.stats's public API and through the project's path,
interleaved in one run.

    .venv/bin/python benchmarks/bench_power.py            # 300 entries, 5 rounds
    .venv/bin/python benchmarks/bench_power.py --quick    # 30 entries, 1 round

Why: every comparison sizes a power entry (`stats.power.power_entry`: the sd of the
differences, the MDE and the queries needed) for each pair, query type and metric: 264 of them in
`experiment=robustness`. Each entry evaluates the test's power ~15 times (a root and a search
over n), each the t-test's power at 24 levels (the randomized test's power integrates over its
resampling: `stats.power`), and `stats.nct.sf` spent 0.36 ms a call in argument handling. The
project calls the distributions' `_ppf`, `_sf` and `_cdf` directly (what the public methods
return), on arrays.

Both sides run `power_entry` on the same random per-query differences (166 queries, the travel
set's size; the alpha of a 48-test family), the reference with `t_test_power` and `_t_powers`
swapped for `tests/support/references.py: scipy_stats_power` and `scipy_stats_powers` (one
public call per value). Every entry of both sides must be identical (asserted). RESULT: the
reference's median ms per entry over the project's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.references import scipy_stats_power, scipy_stats_powers
from timing import add_rounds, at_least_one, timed

from retrieval_bench.stats import power


def _entries(differences: list[np.ndarray], alpha: float) -> list[dict[str, Any]]:
    return [power.power_entry(d, alpha, 0.8, 0.02, 10_000) for d in differences]


def _reference(differences: list[np.ndarray], alpha: float) -> list[dict[str, Any]]:
    with (
        mock.patch.object(power, "t_test_power", scipy_stats_power),
        mock.patch.object(power, "_t_powers", scipy_stats_powers),
    ):
        return _entries(differences, alpha)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=at_least_one, default=300)
    add_rounds(parser, 5)
    parser.add_argument("--quick", action="store_true", help="30 entries, 1 round")
    args = parser.parse_args(argv)
    entries, rounds = (30, 1) if args.quick else (args.entries, args.rounds)
    rng = np.random.default_rng(0)
    differences = [
        rng.normal(rng.normal(0.0, 0.05), rng.uniform(0.05, 0.4), 166) for _ in range(entries)
    ]
    alpha = 0.05 / 48
    _entries(differences[:2], alpha)  # imports scipy outside the timing
    _reference(differences[:2], alpha)
    ms: dict[str, list[float]] = {"scipy.stats": [], "project": []}
    for _ in range(rounds):
        reference, seconds = timed(lambda: _reference(differences, alpha))
        ms["scipy.stats"].append(seconds * 1000 / entries)
        ours, seconds = timed(lambda: _entries(differences, alpha))
        ms["project"].append(seconds * 1000 / entries)
        assert ours == reference, "the power entries differ"
    slow, fast = (statistics.median(ms[side]) for side in ("scipy.stats", "project"))
    print(f"{entries} power entries x {rounds} round(s), identical; median ms per entry")
    print(f"scipy.stats public API {slow:.3f}  project {fast:.3f}")
    print(
        f"RESULT power: {entries} entries identical; scipy.stats {slow:.3f} ms, "
        f"project {fast:.3f} ms per entry = {slow / fast:.1f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
