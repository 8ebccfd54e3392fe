"""BM25: this project's sparse scorer against rank_bm25 (the reference) and bm25s, side by side.

    .venv/bin/python benchmarks/bench_bm25.py            # 50,000 passages, 200 queries
    .venv/bin/python benchmarks/bench_bm25.py --quick    # smoke run: 3,000 passages, 20 queries

All three index the same jieba token lists (chinese_corpus.py: cmrc2018 chunks plus synthetic
passages from its token statistics) and answer the same real cmrc2018 questions. Per engine:
index build time, peak and retained memory of the build (tracemalloc, in a separate pass so it
does not slow the timed one), per-query time for scores over every passage and for a top-100
ranking, and the largest score difference against rank_bm25 over every (query, passage) pair.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from chinese_corpus import build_corpus

from retrieval_bench.retrievers.bm25 import BM25Config, SparseBM25
from retrieval_bench.tiebreak import TieBreak

TOP = 100
Tokens = Sequence[Sequence[str]]


def build_memory(build: Callable[[], Any]) -> tuple[float, float]:
    """(peak, retained) MiB allocated while building (Python objects and numpy buffers)."""
    gc.collect()
    tracemalloc.start()
    index = build()
    retained, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del index
    return peak / 2**20, retained / 2**20


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def per_query(fn: Callable[[Sequence[str]], Any], queries: Tokens) -> list[float]:
    """Seconds for each query: one timed pass, the same for every engine."""
    seconds = []
    for query in queries:
        start = time.perf_counter()
        fn(query)
        seconds.append(time.perf_counter() - start)
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=50_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="3,000 passages, 20 queries")
    parser.add_argument(
        "--synthetic", action="store_true", help="skip cmrc2018 (no jieba): Zipf text only"
    )
    parser.add_argument("--no-bm25s", action="store_true", help="leave bm25s out")
    args = parser.parse_args(argv)
    if args.quick:
        args.passages, args.queries = 3_000, 20
    corpus, gen_s = timed(
        lambda: build_corpus(args.passages, args.queries, synthetic_only=args.synthetic)
    )
    passages, queries = corpus.passages, corpus.queries
    n_tokens = sum(map(len, passages))
    print(
        f"corpus: {len(passages):,} passages ({corpus.n_real:,} real), {n_tokens:,} tokens, "
        f"{len(queries)} queries; {corpus.source}; generated in {gen_s:.1f}s"
    )
    config = BM25Config()
    rows: dict[str, dict[str, Any]] = {}

    # --- rank_bm25: the reference ------------------------------------------------------------
    from rank_bm25 import BM25Okapi

    reference, build_s = timed(lambda: BM25Okapi([list(p) for p in passages]))
    peak, kept = build_memory(lambda: BM25Okapi([list(p) for p in passages]))
    ref_scores: list[np.ndarray] = []
    score_times, top_times = [], []
    tie = TieBreak([f"p{i:08d}" for i in range(len(passages))])
    everything = np.arange(len(passages))
    ref_top = []
    for query in queries:
        scores, seconds = timed(lambda q=query: reference.get_scores(q))
        # rank_bm25's own top-n is an argsort of these scores; cut with the same tie-break.
        (top, _), cut = timed(lambda s=scores: tie.top(everything, s, TOP))
        ref_scores.append(scores)
        ref_top.append(top)
        score_times.append(seconds)
        top_times.append(seconds + cut)
    rows["rank_bm25 (reference)"] = {
        "build": build_s,
        "peak": peak,
        "kept": kept,
        "scores": score_times,
        "top": top_times,
        "diff": 0.0,
        "same_rank": len(queries),
    }

    # --- this project ------------------------------------------------------------------------
    ours, build_s = timed(lambda: SparseBM25(passages, config))
    peak, kept = build_memory(lambda: SparseBM25(passages, config))
    diffs, same, bitwise = [], 0, 0
    for query, expected, expected_top in zip(queries, ref_scores, ref_top, strict=True):
        scores, matched = ours.scores(query)
        diffs.append(float(np.abs(scores - expected).max()))
        bitwise += int(np.array_equal(scores, expected))
        top, _ = tie.top(matched, scores[matched], TOP)
        same += int(np.array_equal(top, expected_top))

    def our_top(query: Sequence[str]) -> Any:
        scores, matched = ours.scores(query)
        return tie.top(matched, scores[matched], TOP)

    rows["this project (sparse)"] = {
        "build": build_s,
        "peak": peak,
        "kept": kept,
        "scores": per_query(ours.scores, queries),
        "top": per_query(our_top, queries),
        "diff": max(diffs),
        "same_rank": same,
        "bitwise": bitwise,
    }

    # --- bm25s, for reference (other IDF, no epsilon floor, float32) --------------------------
    if not args.no_bm25s:
        try:
            import bm25s
        except ImportError:
            print("bm25s is not installed; skipping it")
        else:

            def build_bm25s() -> Any:
                model = bm25s.BM25(method="robertson", k1=config.k1, b=config.b)
                model.index([list(p) for p in passages], show_progress=False)
                return model

            other, build_s = timed(build_bm25s)
            peak, kept = build_memory(build_bm25s)
            diffs, same = [], 0
            for query, expected, expected_top in zip(queries, ref_scores, ref_top, strict=True):
                scores = other.get_scores(list(query)).astype(np.float64)
                diffs.append(float(np.abs(scores - expected).max()))
                same += int(np.array_equal(tie.top(everything, scores, TOP)[0], expected_top))

            def bm25s_top(query: Sequence[str]) -> Any:
                return other.retrieve([list(query)], k=TOP, show_progress=False)

            rows["bm25s 0.3 (robertson)"] = {
                "build": build_s,
                "peak": peak,
                "kept": kept,
                "scores": per_query(lambda q: other.get_scores(list(q)), queries),
                "top": per_query(bm25s_top, queries),
                "diff": max(diffs),
                "same_rank": same,
            }

    report(rows, len(passages), len(queries))
    return 0


def report(rows: dict[str, dict[str, Any]], n_passages: int, n_queries: int) -> None:
    ref = rows["rank_bm25 (reference)"]
    ref_q = statistics.mean(ref["scores"])
    ref_top = statistics.mean(ref["top"])
    print()
    print(f"BM25 over {n_passages:,} passages, {n_queries} queries (ms per query: mean, median)")
    header = (
        f"{'engine':<24}{'build s':>9}{'peak MiB':>10}{'index MiB':>11}{'scores ms/q':>18}"
        f"{'x faster':>10}{'top-100 ms/q':>18}{'x faster':>10}{'max |Δ| vs rank_bm25':>23}"
        f"{'same top-100':>14}"
    )
    print(header)
    print("-" * len(header))
    for name, row in rows.items():
        q = statistics.mean(row["scores"])
        top = statistics.mean(row["top"])
        q_mid = statistics.median(row["scores"]) * 1e3
        top_mid = statistics.median(row["top"]) * 1e3
        print(
            f"{name:<24}{row['build']:>9.2f}{row['peak']:>10.0f}{row['kept']:>11.0f}"
            f"{q * 1e3:>10.3f}, {q_mid:<7.3g}{ref_q / q:>10.0f}"
            f"{top * 1e3:>10.3f}, {top_mid:<7.3g}{ref_top / top:>10.0f}"
            f"{row['diff']:>23.3g}{row['same_rank']:>9}/{n_queries}"
        )
    ours = rows["this project (sparse)"]
    q = statistics.mean(ours["scores"])
    print()
    print(
        f"RESULT bm25: {n_passages:,} passages x {n_queries} queries: this project "
        f"{q * 1e3:.3f} ms/query vs rank_bm25 {ref_q * 1e3:.1f} ms/query = {ref_q / q:.0f}x "
        f"faster (top-100: {ref_top / statistics.mean(ours['top']):.0f}x); build "
        f"{ours['build']:.2f}s vs {ref['build']:.2f}s ({ref['build'] / ours['build']:.1f}x); "
        f"max |score diff| {ours['diff']:.3g} ({ours['bitwise']}/{n_queries} queries "
        f"bit-identical); top-100 identical {ours['same_rank']}/{n_queries}"
    )


if __name__ == "__main__":
    raise SystemExit(main())
