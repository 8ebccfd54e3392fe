"""A PQ index trained as FAISS's factory leaves it against as the dense arm builds it, side by side.

    .venv/bin/python benchmarks/bench_pq.py            # PQ8 on 300 x 512 vectors, 3 rounds
    .venv/bin/python benchmarks/bench_pq.py --quick    # PQ2x4 on 300 x 16, 1 round

Why: `faiss.index_factory` turns on polysemous training for every PQ index: after k-means it
anneals a renumbering of each sub-quantizer's centroids, which only a polysemous search
(Hamming filtering) uses. The arm searches by plain ADC, so `retrievers.dense_index` turns it
off. Each round trains and fills both indexes on the same random unit vectors (what the arm
indexes; the start-up selector probe trains 256+ of the encoder's dimension), searches every
vector's top 10 and asserts the same ids, and scores equal to float32 rounding: the renumbering
moves each centroid's row in the BLAS product that scores it, so a score may differ in its last
bit (1.2e-7 here at 512-d). RESULT: FAISS's default time over the arm's, and that difference.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import faiss
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import add_rounds, timed

from retrieval_bench.retrievers.dense_index import without_polysemous_training

SAME_SCORE = 1e-6  # float32 rounding of an inner product of unit vectors


def build_and_search(index: faiss.Index, vectors: np.ndarray) -> tuple[np.ndarray, ...]:
    index.train(vectors)
    index.add(vectors)
    return index.search(vectors, 10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_rounds(parser, 3)
    parser.add_argument("--quick", action="store_true", help="PQ2x4 on 16-d vectors, 1 round")
    args = parser.parse_args(argv)
    factory, dim, rounds = ("PQ2x4", 16, 1) if args.quick else ("PQ8", 512, args.rounds)
    vectors = np.random.default_rng(0).standard_normal((300, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    largest = 0.0
    seconds: dict[str, list[float]] = {"default": [], "arm": []}
    for _ in range(rounds):
        default = faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)
        assert faiss.downcast_index(default).do_polysemous_training, "FAISS's default changed"
        theirs, elapsed = timed(lambda: build_and_search(default, vectors))  # noqa: B023
        seconds["default"].append(elapsed)
        arms = faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)
        without_polysemous_training(arms)  # what the arm's index factory does to every index
        ours, elapsed = timed(lambda: build_and_search(arms, vectors))  # noqa: B023
        seconds["arm"].append(elapsed)
        assert np.array_equal(ours[1], theirs[1]), "the arm's index ranks other ids"
        largest = max(largest, float(np.abs(ours[0] - theirs[0]).max()))
        assert largest <= SAME_SCORE, f"scores differ by {largest:.1e}"
    slow, fast = (statistics.median(seconds[side]) for side in ("default", "arm"))
    print(f"{factory} on 300 x {dim} unit vectors, {rounds} round(s), median s; same ids")
    print(f"factory default (polysemous training) {slow:.3f}  arm {fast:.3f}")
    print(
        f"RESULT pq: {factory} 300 x {dim} same ids, max |score diff| {largest:.1e}; "
        f"default {slow:.3f} s, arm {fast:.3f} s = {slow / fast:.0f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
