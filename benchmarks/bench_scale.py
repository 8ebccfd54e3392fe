"""Scale: BM25 and dense search at 10k, 100k and 1M passages, and how each cost grows.

    .venv/bin/python benchmarks/bench_scale.py            # 10k, 100k, 1M passages
    .venv/bin/python benchmarks/bench_scale.py --quick    # smoke run: 2k, 10k passages, 64-d

BM25 (this project's exact SparseBM25): synthetic Chinese passages drawn from cmrc2018's jieba
token statistics (chinese_corpus.py), queried with 200 real cmrc2018 questions. Per size:
index build time from token lists and from cached term ids (the token cache's path), index
memory per passage, peak memory of the build, query latency (scores over every passage plus the
top-100 cut), and the token cache's load time next to what jieba would take on that much text.

Dense (this project's DenseRetriever over FAISS): vectors sampled around real USE embeddings of
cmrc2018 passages and questions (noise drawn from their empirical covariance, so neighbourhoods
have the shape of real text embeddings; pure Gaussian noise when the encoder or cmrc2018 is
unavailable), 512-d float32 as the default USE encoder produces. Exact Flat against IVF (and
HNSW up to 100k; HNSW construction at 1M takes tens of minutes on 2 cores, see --hnsw-max):
build time, memory, batched per-query latency with and without a 10% id-selector filter, and
recall@10 against exact.
"""

from __future__ import annotations

import argparse
import gc
import math
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from chinese_corpus import build_corpus, load_real
from dense_vectors import VectorSpace, sample_around

from retrieval_bench.retrievers.bm25 import BM25Config, SparseBM25
from retrieval_bench.retrievers.dense import DenseRetriever
from retrieval_bench.retrievers.dense_index import DenseIndexConfig
from retrieval_bench.text.token_cache import TokenizedCorpus, _read, _write
from retrieval_bench.tiebreak import TieBreak

TOP = 100
K = 10


def rss_mib() -> float:
    gc.collect()
    return psutil.Process().memory_info().rss / 2**20


def clock(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def growth(values: dict[int, float]) -> str:
    """Empirical exponent b in cost ~ n^b between the two largest sizes (the smallest ones are
    dominated by fixed costs and memory-measurement noise)."""
    sizes = sorted(values)
    lo, hi = sizes[-2] if len(sizes) > 1 else sizes[0], sizes[-1]
    if values[lo] <= 0 or values[hi] <= 0 or hi == lo:
        return "n/a"
    return f"n^{math.log(values[hi] / values[lo]) / math.log(hi / lo):.2f}"


# --- BM25 ---------------------------------------------------------------------------------------


def jieba_rate(real: tuple | None) -> float | None:
    """Characters per second of the project's jieba tokenizer on cmrc2018 text."""
    if real is None:
        return None
    from retrieval_bench.config.text import TextConfig
    from retrieval_bench.text.tokenizer import Tokenizer

    texts = real[2][:2000]
    tokenizer = Tokenizer(TextConfig(use_lexicon=False))
    tokenizer.tokenize("预热")
    _, seconds = clock(lambda: [tokenizer.tokenize(t) for t in texts])
    return sum(map(len, texts)) / seconds


def bm25_at(n: int, real: tuple | None, n_queries: int, chars_per_passage: float) -> dict:
    corpus, gen_s = clock(lambda: build_corpus(n, n_queries, real=real, synthetic_only=not real))
    passages, queries = corpus.passages, corpus.queries
    del corpus
    n_tokens = sum(map(len, passages))
    config = BM25Config()
    gc.collect()
    start = time.perf_counter()
    index = SparseBM25(passages, config)
    build_s = time.perf_counter() - start
    matrix = index.matrix
    vocab_bytes = sum(sys.getsizeof(t) for t in index.vocab) + sys.getsizeof(index.vocab)
    array_bytes = matrix.data.nbytes + matrix.indices.nbytes + matrix.indptr.nbytes
    array_bytes += index.idf.nbytes + (0 if index.table is None else index.table.nbytes)
    del index
    gc.collect()
    tracemalloc.start()
    kept = SparseBM25(passages, config)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    del kept
    # The token cache's path: term ids saved once, then loaded and indexed without jieba.
    tokenized = TokenizedCorpus.from_tokens(passages)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tokens.npz"
        _write(path, tokenized)
        size = path.stat().st_size
        start = time.perf_counter()
        loaded = _read(path, len(passages))
        load_s = time.perf_counter() - start
    assert loaded is not None
    start = time.perf_counter()
    index = SparseBM25.from_term_ids(loaded.vocab, loaded.ids, loaded.lengths, config)
    from_ids_s = time.perf_counter() - start
    del passages, tokenized, loaded
    gc.collect()
    tie = TieBreak([f"p{i:09d}" for i in range(n)])
    latencies = []
    for query in queries:
        start = time.perf_counter()
        scores, matched = index.scores(query)
        tie.top(matched, scores[matched], TOP)
        latencies.append(time.perf_counter() - start)
    del index, tie
    gc.collect()
    return {
        "n": n,
        "tokens": n_tokens,
        "gen_s": gen_s,
        "build_s": build_s,
        "from_ids_s": from_ids_s,
        "cache_load_s": load_s,
        "cache_mib": size / 2**20,
        "jieba_s": n * chars_per_passage,  # multiplied by 1/rate by the caller
        "bytes_per_passage": (array_bytes + vocab_bytes) / n,
        "index_mib": (array_bytes + vocab_bytes) / 2**20,
        "peak_mib": peak / 2**20,
        "q_mean_ms": statistics.mean(latencies) * 1e3,
        "q_p50_ms": statistics.median(latencies) * 1e3,
        "q_p95_ms": float(np.percentile(latencies, 95)) * 1e3,
    }


# --- dense --------------------------------------------------------------------------------------


def dense_at(
    n: int,
    passages: np.ndarray,
    queries: np.ndarray,
    configs: list[DenseIndexConfig],
) -> list[dict]:
    ids = [f"p{i:09d}" for i in range(n)]
    texts = [str(i) for i in range(len(queries))]
    mask = np.zeros(n, dtype=bool)
    mask[np.random.default_rng(7).choice(n, n // 10, replace=False)] = True
    rows = []
    exact_pools: list[list[int]] | None = None
    exact_filtered: list[list[int]] | None = None
    for config in configs:
        before = rss_mib()
        # IVF settings share one trained index (the per-process memo keyed on the vectors).
        key = f"bench-scale-{n}" if config.index.startswith("IVF") else None
        retriever, build_s = clock(
            lambda c=config, k=key: DenseRetriever(ids, passages, lambda _: queries, c, k)
        )
        label = config.index + (f" np={config.nprobe}" if config.index.startswith("IVF") else "")
        memory = rss_mib() - before
        retriever.search(texts[:2], K, [None, None])  # warm-up (threads, caches)
        results, search_s = clock(lambda r=retriever: r.search(texts, K, [None] * len(texts)))
        filtered, filter_s = clock(lambda r=retriever: r.search(texts, K, [mask] * len(texts)))
        pools = [r.indices.tolist() for r in results]
        fpools = [r.indices.tolist() for r in filtered]
        assert all(mask[p].all() for p in fpools), "filter applied before ranking"
        if exact_pools is None:
            exact_pools, exact_filtered = pools, fpools
        assert exact_filtered is not None
        rows.append(
            {
                "n": n,
                "index": label,
                "reused": retriever.index.reused,
                "build_s": build_s,
                "mem_mib": memory,
                "q_ms": search_s / len(texts) * 1e3,
                "q_filtered_ms": filter_s / len(texts) * 1e3,
                "recall": _recall(pools, exact_pools),
                "recall_filtered": _recall(fpools, exact_filtered),
            }
        )
        del retriever, results, filtered
        gc.collect()
    return rows


def _recall(found: list[list[int]], truth: list[list[int]]) -> float:
    return statistics.mean(
        len(set(f) & set(t)) / len(t) for f, t in zip(found, truth, strict=True) if t
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--quick", action="store_true", help="2k and 10k passages, 64-d")
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--ivf", default="IVF{nlist},Flat", help="IVF factory; {nlist} filled")
    parser.add_argument("--nprobe", default="16,64", help="IVF lists probed, one row each")
    parser.add_argument("--hnsw", default="HNSW32")
    parser.add_argument("--hnsw-max", type=int, default=100_000, help="largest size for HNSW")
    parser.add_argument("--skip-bm25", action="store_true")
    parser.add_argument("--skip-dense", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.dim, args.queries = "2000,10000", 64, 50
    sizes = [int(s) for s in args.sizes.split(",")]
    import faiss

    print(
        f"machine: {psutil.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB;"
        f" faiss {faiss.__version__} with {faiss.omp_get_max_threads()} threads"
    )

    if not args.skip_bm25:
        from retrieval_bench.config.text import TextConfig
        from retrieval_bench.text.tokenizer import Tokenizer

        real = None if args.quick else load_real(Tokenizer(TextConfig(use_lexicon=False)).tokenize)
        rate = jieba_rate(real)
        chars = statistics.mean(map(len, real[2])) if real else 150.0
        rows = [bm25_at(n, real, args.queries, chars) for n in sizes]
        print()
        print("BM25 (exact SparseBM25), synthetic Chinese from cmrc2018 token statistics")
        header = (
            f"{'passages':>10}{'tokens':>12}{'build s':>9}{'from ids s':>11}{'cache load s':>13}"
            f"{'jieba s':>9}{'index MiB':>10}{'B/passage':>10}{'peak MiB':>9}"
            f"{'query ms mean':>14}{'p50':>7}{'p95':>7}"
        )
        print(header)
        print("-" * len(header))
        for r in rows:
            jieba = f"{r['jieba_s'] / rate:>9.0f}" if rate else f"{'n/a':>9}"
            print(
                f"{r['n']:>10,}{r['tokens']:>12,}{r['build_s']:>9.2f}{r['from_ids_s']:>11.2f}"
                f"{r['cache_load_s']:>13.2f}{jieba}{r['index_mib']:>10.0f}"
                f"{r['bytes_per_passage']:>10.0f}{r['peak_mib']:>9.0f}{r['q_mean_ms']:>14.2f}"
                f"{r['q_p50_ms']:>7.2f}{r['q_p95_ms']:>7.2f}"
            )
        if rate:
            print(
                f"jieba: {rate:,.0f} characters/s on this machine (one core), "
                f"{chars:.0f} characters per passage"
            )
        by = {k: {r["n"]: r[k] for r in rows} for k in ("build_s", "index_mib", "q_mean_ms")}
        print(
            f"growth {sizes[-2] if len(sizes) > 1 else sizes[0]:,} -> {sizes[-1]:,}: "
            f"build {growth(by['build_s'])}, "
            f"memory {growth(by['index_mib'])}, query latency {growth(by['q_mean_ms'])}"
        )
        last = rows[-1]
        print(
            f"RESULT scale bm25: {last['n']:,} passages: build {last['build_s']:.1f}s "
            f"({last['from_ids_s']:.1f}s from cached ids), "
            f"{last['bytes_per_passage']:.0f} B/passage, query {last['q_mean_ms']:.1f} ms mean "
            f"/ {last['q_p95_ms']:.1f} ms p95"
        )
        gc.collect()

    if not args.skip_dense:
        rng = np.random.default_rng(0)
        space = VectorSpace.build(args.dim, 0)
        base_p, basis, source = space.passages, space.basis, space.source
        queries = sample_around(space.queries, args.queries, 1.0, rng, basis)
        rows = []
        for n in sizes:
            passages = sample_around(base_p, n, 1.0, rng, basis)
            # nlist ~ sqrt(n); k-means on 64 vectors per list keeps training to seconds.
            nlist = max(16, int(math.sqrt(n)) // 16 * 16)
            ivf = args.ivf.format(nlist=nlist)
            configs = [DenseIndexConfig(index="Flat")]
            configs += [
                DenseIndexConfig(index=ivf, nprobe=int(p), train_size=64 * nlist)
                for p in args.nprobe.split(",")
            ]
            if n <= args.hnsw_max:
                configs.append(DenseIndexConfig(index=args.hnsw, ef_search=128))
            for config in configs:
                config.recall_vs_exact = False
            rows += dense_at(n, passages, queries, configs)
            del passages
            gc.collect()
        print()
        print(
            f"Dense, {args.dim}-d float32, {args.queries} queries batched; vectors around "
            f"{source}; HNSW efSearch=128; build 0 = trained index reused"
        )
        header = (
            f"{'passages':>10}{'index':>22}{'build s':>9}{'memory MiB':>11}{'ms/query':>10}"
            f"{'vs Flat':>9}{'filtered ms/q':>14}{'recall@10':>10}{'filtered':>9}"
        )
        print(header)
        print("-" * len(header))
        flat_q = {r["n"]: r["q_ms"] for r in rows if r["index"] == "Flat"}
        for r in rows:
            print(
                f"{r['n']:>10,}{r['index']:>22}{r['build_s']:>9.1f}{r['mem_mib']:>11.0f}"
                f"{r['q_ms']:>10.2f}{flat_q[r['n']] / r['q_ms']:>8.1f}x{r['q_filtered_ms']:>14.2f}"
                f"{r['recall']:>10.3f}{r['recall_filtered']:>9.3f}"
            )
        for kind in ("Flat", "IVF", "HNSW"):
            # The first row of each kind at each size: the one that built its index.
            sel = [r for r in rows if r["index"].startswith(kind) and not r["reused"]]
            if len({r["n"] for r in sel}) < 2:
                continue
            q = {r["n"]: r["q_ms"] for r in sel}
            b = {r["n"]: r["build_s"] for r in sel}
            m = {r["n"]: max(r["mem_mib"], 1e-3) for r in sel}
            lo, hi = sorted(q)[-2:]
            print(
                f"growth {kind} {lo:,} -> {hi:,}: build {growth(b)}, memory {growth(m)}, "
                f"query {growth(q)}"
            )
        big = [r for r in rows if r["n"] == sizes[-1]]
        flat = next(r for r in big if r["index"] == "Flat")
        approx = "; ".join(
            f"{r['index']} {r['q_ms']:.2f} ms/query ({flat['q_ms'] / r['q_ms']:.0f}x faster) "
            f"recall@10 {r['recall']:.3f} (filtered {r['recall_filtered']:.3f})"
            for r in big
            if r is not flat
        )
        print(
            f"RESULT scale dense: {sizes[-1]:,} x {args.dim}-d: Flat {flat['q_ms']:.1f} ms/query, "
            f"{flat['mem_mib']:.0f} MiB; {approx}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
