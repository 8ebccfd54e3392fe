"""BGE-M3 scoring: the m3 arms' vectorised scores against FlagEmbedding's pair functions, and
what exact ColBERT costs next to `arms.m3.colbert_depth`.

    .venv/bin/python benchmarks/bench_m3.py            # 1,000 passages, 10 queries, 1024-d
    .venv/bin/python benchmarks/bench_m3.py --quick    # smoke run: 300 passages, 64-d

Outputs are synthetic, shaped like BGE-M3's (no model runs: scoring does not depend on how the
vectors were made): unit ColBERT vectors, 20-200 tokens per passage and 8-24 per query, lexical
weights over a 250,002-token vocabulary drawn from a Zipf law. FlagEmbedding's reference is
`BGEM3FlagModel.compute_lexical_matching_score` and `colbert_score`, called once per (query,
passage) pair as its API offers them (unbound: neither reads the model). Prints ms per query
and the largest score difference.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from retrieval_bench.encoders.m3 import M3Outputs
from retrieval_bench.retrievers.m3 import M3Scorer

VOCAB = 250_002


def synthetic(n: int, dim: int, tokens: tuple[int, int], rng: np.random.Generator) -> M3Outputs:
    lengths = rng.integers(tokens[0], tokens[1] + 1, size=n)
    vectors = rng.standard_normal((int(lengths.sum()), dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    dense = rng.standard_normal((n, dim)).astype(np.float32)
    dense /= np.linalg.norm(dense, axis=1, keepdims=True)
    out: dict[str, list] = {"dense_vecs": list(dense), "lexical_weights": [], "colbert_vecs": []}
    start = 0
    for length in lengths:
        ids = np.minimum(rng.zipf(1.3, size=int(length)), VOCAB - 1)
        weights = rng.random(len(ids)).astype(np.float32) * 0.3
        out["lexical_weights"].append({str(t): w for t, w in zip(ids, weights, strict=True)})
        out["colbert_vecs"].append(vectors[start : start + length])
        start += int(length)
    return M3Outputs.from_flag(out, dim)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    n, dim, n_queries, depth = (300, 64, 5, 50) if args.quick else (1_000, 1024, 10, 100)
    from FlagEmbedding import BGEM3FlagModel

    rng = np.random.default_rng(0)
    corpus = synthetic(n, dim, (20, 200), rng)
    queries = synthetic(n_queries, dim, (8, 24), rng)
    scorer = M3Scorer(corpus)
    every = np.arange(n)

    timings: dict[str, float] = {}
    diffs: dict[str, float] = {}
    for mode in ("sparse", "colbert"):
        ours_s = flag_s = 0.0
        worst = 0.0
        for qi in range(n_queries):
            start = time.perf_counter()
            ours = getattr(scorer, mode)(queries, qi, every)
            ours_s += time.perf_counter() - start
            start = time.perf_counter()
            if mode == "sparse":
                q = queries.lexical_weights(qi)
                ref = [
                    BGEM3FlagModel.compute_lexical_matching_score(  # type: ignore[arg-type]
                        None, q, corpus.lexical_weights(i)
                    )
                    for i in every
                ]
            else:
                q_vectors = queries.colbert(qi)
                ref = [
                    float(BGEM3FlagModel.colbert_score(None, q_vectors, corpus.colbert(i)))  # type: ignore[arg-type]
                    for i in every
                ]
            flag_s += time.perf_counter() - start
            worst = max(worst, float(np.max(np.abs(ours - np.asarray(ref, dtype=np.float64)))))
        timings[mode] = ours_s
        timings[f"flag_{mode}"] = flag_s
        diffs[mode] = worst

    # ColBERT over the dense+sparse union of the top `depth` (arms.m3.colbert_depth) vs every
    # passage.
    start = time.perf_counter()
    for qi in range(n_queries):
        dense_top = np.argsort(-scorer.dense(queries, qi, every))[:depth]
        sparse_top = np.argsort(-scorer.sparse(queries, qi, every))[:depth]
        scorer.colbert(queries, qi, np.union1d(dense_top, sparse_top))
    timings["colbert_depth"] = time.perf_counter() - start

    per_query = {name: 1000 * s / n_queries for name, s in timings.items()}
    print(f"{n:,} passages, {n_queries} queries, {dim}-d, {len(corpus.colbert_vectors):,} tokens")
    for mode in ("sparse", "colbert"):
        print(
            f"{mode:8s} this project {per_query[mode]:9.2f} ms/query   FlagEmbedding pairs "
            f"{per_query['flag_' + mode]:9.2f} ms/query   "
            f"{per_query['flag_' + mode] / per_query[mode]:7.1f}x   max |diff| {diffs[mode]:.2e}"
        )
    print(
        f"colbert  exact over all {per_query['colbert']:.2f} ms/query; "
        f"arms.m3.colbert_depth={depth}: "
        f"{per_query['colbert_depth']:.2f} ms/query (dense + sparse first stage included)"
    )
    print(
        f"RESULT m3: {n:,} passages: sparse {per_query['flag_sparse'] / per_query['sparse']:.1f}x, "
        f"colbert {per_query['flag_colbert'] / per_query['colbert']:.1f}x faster than "
        f"FlagEmbedding's pair functions; max |score diff| sparse {diffs['sparse']:.2e} "
        f"colbert {diffs['colbert']:.2e}"
    )


if __name__ == "__main__":
    main()
