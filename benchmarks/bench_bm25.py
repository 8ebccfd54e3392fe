"""BM25: this project's sparse scorer against rank_bm25 (the reference) and bm25s, side by side.

    .venv/bin/python benchmarks/bench_bm25.py            # 50,000 passages, 200 queries
    .venv/bin/python benchmarks/bench_bm25.py --million  # 1,000,000 passages, no rank_bm25
    .venv/bin/python benchmarks/bench_bm25.py --quick    # smoke run: 3,000 passages, 20 queries

All engines index the same jieba token lists (chinese_corpus.py: cmrc2018 chunks plus synthetic
passages from its token statistics) and answer the same real cmrc2018 questions. Per engine:
index build time, peak and retained memory of the build (tracemalloc, in a separate pass so it
does not slow the timed one), per-query time for scores over every passage and for a top-100
ranking, and the largest score difference against rank_bm25 over every (query, passage) pair.

This project's scorer is timed twice: its compiled per-query kernel (the default where it is
built) and its numpy path. bm25s is timed with its default numpy backend and, where numba is
installed, its numba backend (compiled before the clock starts). The per-query timings of the
engines are interleaved query by query (`--rounds` passes, the fastest of each query kept), so
load on a shared machine falls on all of them alike. `--million` (or `--no-reference`) leaves
rank_bm25 out: its index of a million Python dicts takes gigabytes and each query seconds; the
two scoring paths are then checked bit-identical to each other, and each to rank_bm25 at 50,000.
`--million` (or `--no-memory`) also skips the traced-memory builds (nan in the table): under
tracemalloc a million-passage build takes tens of minutes.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import statistics
import sys
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from chinese_corpus import build_corpus
from timing import add_rounds, interleaved, timed

from retrieval_bench.retrievers.bm25 import BM25Config, SparseBM25
from retrieval_bench.retrievers.bm25_kernel import kernel_available
from retrieval_bench.tiebreak import TieBreak

TOP = 100
REFERENCE = "rank_bm25 (reference)"
OURS = "this project (compiled)"
OURS_NUMPY = "this project (numpy path)"
Tokens = Sequence[Sequence[str]]


def build_memory(build: Callable[[], Any], measure: bool = True) -> tuple[float, float]:
    """(peak, retained) MiB allocated while building (Python objects and numpy buffers); NaN
    for both where not `measure`d."""
    if not measure:
        return float("nan"), float("nan")
    gc.collect()
    tracemalloc.start()
    index = build()
    retained, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del index
    return peak / 2**20, retained / 2**20



def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=50_000)
    parser.add_argument("--queries", type=int, default=200)
    add_rounds(parser, 3, "timed passes over the queries")
    parser.add_argument("--quick", action="store_true", help="3,000 passages, 20 queries")
    parser.add_argument("--million", action="store_true", help="1,000,000 passages, no rank_bm25")
    parser.add_argument("--no-reference", action="store_true", help="leave rank_bm25 out")
    parser.add_argument(
        "--synthetic", action="store_true", help="skip cmrc2018 (no jieba): Zipf text only"
    )
    parser.add_argument("--no-bm25s", action="store_true", help="leave bm25s out")
    parser.add_argument(
        "--no-memory",
        action="store_true",
        help="skip the traced-memory builds (each engine built once more under tracemalloc: "
        "tens of minutes at 1M); --million implies it",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.passages, args.queries, args.rounds = 3_000, 20, 1
    if args.million:
        args.passages, args.no_reference, args.no_memory = 1_000_000, True, True
    measure_memory = not args.no_memory
    load = os.getloadavg()
    print(
        f"machine: {os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
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
    engines: dict[str, Callable[[Sequence[str]], Any]] = {}
    tops: dict[str, Callable[[Sequence[str]], Any]] = {}
    tie = TieBreak([f"p{i:08d}" for i in range(len(passages))])
    everything = np.arange(len(passages))

    # --- rank_bm25: the reference ------------------------------------------------------------
    ref_scores: list[np.ndarray] | None = None
    ref_top: list[np.ndarray] = []
    if not args.no_reference:
        from rank_bm25 import BM25Okapi

        reference, build_s = timed(lambda: BM25Okapi([list(p) for p in passages]))
        peak, kept = build_memory(lambda: BM25Okapi([list(p) for p in passages]), measure_memory)
        ref_scores = []
        score_times, top_times = [], []
        for query in queries:
            scores, seconds = timed(lambda q=query: reference.get_scores(q))
            # rank_bm25's own top-n is an argsort of these scores; cut with the same tie-break.
            (top, _), cut = timed(lambda s=scores: tie.top(everything, s, TOP))
            ref_scores.append(scores)
            ref_top.append(top)
            score_times.append(seconds)
            top_times.append(seconds + cut)
        rows[REFERENCE] = {
            "build": build_s,
            "peak": peak,
            "kept": kept,
            "scores": score_times,
            "top": top_times,
            "diff": 0.0,
            "same_rank": len(queries),
        }
        del reference

    # --- this project: the compiled kernel and the numpy path --------------------------------
    ours, build_s = timed(lambda: SparseBM25(passages, config))
    peak, kept = build_memory(lambda: SparseBM25(passages, config), measure_memory)
    numpy_path = SparseBM25(passages, config)
    numpy_path.compiled = False
    if not kernel_available():
        print("note: the compiled BM25 kernel is not built here; both rows are the numpy path")

    def top_of(scorer: SparseBM25) -> Callable[[Sequence[str]], Any]:
        """What the BM25 arm does per query: the compiled kernel's fused top k where it is
        built, else scores + TieBreak.top (the numpy path)."""

        def run(query: Sequence[str]) -> Any:
            fused = scorer.top(query, TOP, tie.id_order)
            if fused is not None:
                return fused[:2]
            scores, matched = scorer.scores(query)
            return tie.top(matched, scores[matched], TOP)

        return run

    diffs, same, bitwise, paths_equal = [], 0, 0, 0
    for i, query in enumerate(queries):
        scores, matched = ours.scores(query)
        other_scores, other_matched = numpy_path.scores(query)
        paths_equal += int(
            np.array_equal(scores, other_scores) and np.array_equal(matched, other_matched)
        )
        if ref_scores is not None:
            diffs.append(float(np.abs(scores - ref_scores[i]).max()))
            bitwise += int(np.array_equal(scores, ref_scores[i]))
            top = top_of(ours)(query)[0]
            same += int(np.array_equal(top, ref_top[i]))

    for name, scorer in ((OURS, ours), (OURS_NUMPY, numpy_path)):
        rows[name] = {
            "build": build_s,
            "peak": peak,
            "kept": kept,
            "diff": max(diffs) if diffs else None,
            "same_rank": same if ref_scores is not None else None,
            "bitwise": bitwise,
            "paths_equal": paths_equal,
        }
        engines[name] = scorer.scores
        tops[name] = top_of(scorer)

    # --- bm25s, for reference (other IDF, no epsilon floor, float32) --------------------------
    if not args.no_bm25s:
        try:
            import bm25s
        except ImportError:
            print("bm25s is not installed; skipping it")
        else:
            for backend in ("numpy", "numba"):
                if backend == "numba" and importlib.util.find_spec("numba") is None:
                    print("numba is not installed: bm25s's numba backend is left out")
                    continue

                def build_bm25s(backend: str = backend) -> Any:
                    model = bm25s.BM25(
                        method="robertson", k1=config.k1, b=config.b, backend=backend
                    )
                    model.index([list(p) for p in passages], show_progress=False)
                    return model

                other, build_s = timed(build_bm25s)
                peak, kept = build_memory(build_bm25s, measure_memory)
                other.get_scores(list(queries[0]))  # numba compiles here, before any clock
                other.retrieve([list(queries[0])], k=TOP, show_progress=False)
                diffs_s, same_s = [], 0
                if ref_scores is not None:
                    for query, expected, expected_top in zip(
                        queries, ref_scores, ref_top, strict=True
                    ):
                        scores = other.get_scores(list(query)).astype(np.float64)
                        diffs_s.append(float(np.abs(scores - expected).max()))
                        same_s += int(
                            np.array_equal(tie.top(everything, scores, TOP)[0], expected_top)
                        )
                name = f"bm25s 0.3 {backend}"
                rows[name] = {
                    "build": build_s,
                    "peak": peak,
                    "kept": kept,
                    "diff": max(diffs_s) if diffs_s else None,
                    "same_rank": same_s if ref_scores is not None else None,
                }
                engines[name] = lambda q, m=other: m.get_scores(list(q))
                tops[name] = lambda q, m=other: m.retrieve([list(q)], k=TOP, show_progress=False)

    score_times = interleaved(engines, queries, args.rounds)
    top_times = interleaved(tops, queries, args.rounds)
    for name in engines:
        rows[name]["scores"] = score_times[name]
        rows[name]["top"] = top_times[name]
    report(rows, len(passages), len(queries), args.rounds)
    load = os.getloadavg()
    print(f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return 0


def _ratio(slower: list[float], faster: list[float], how: Callable[[list[float]], float]) -> str:
    return f"{how(slower) / how(faster):.2f}x"


def report(rows: dict[str, dict[str, Any]], n_passages: int, n_queries: int, rounds: int) -> None:
    base = rows.get(REFERENCE, rows[OURS])
    base_q = statistics.mean(base["scores"])
    base_top = statistics.mean(base["top"])
    base_name = "rank_bm25" if REFERENCE in rows else "this project"
    print()
    print(
        f"BM25 over {n_passages:,} passages, {n_queries} queries (ms per query: mean, median; "
        f"fastest of {rounds} interleaved rounds)"
    )
    header = (
        f"{'engine':<28}{'build s':>9}{'peak MiB':>10}{'index MiB':>11}{'scores ms/q':>18}"
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
        diff = "n/a" if row["diff"] is None else f"{row['diff']:.3g}"
        same = "n/a" if row["same_rank"] is None else f"{row['same_rank']}/{n_queries}"
        print(
            f"{name:<28}{row['build']:>9.2f}{row['peak']:>10.0f}{row['kept']:>11.0f}"
            f"{q * 1e3:>10.3f}, {q_mid:<7.3g}{base_q / q:>10.1f}"
            f"{top * 1e3:>10.3f}, {top_mid:<7.3g}{base_top / top:>10.1f}"
            f"{diff:>23}{same:>14}"
        )
    print(f"(x faster: against {base_name})")
    ours = rows[OURS]
    q = statistics.mean(ours["scores"])
    line = f"RESULT bm25: {n_passages:,} passages x {n_queries} queries: this project "
    line += f"{q * 1e3:.3f} ms/query"
    if REFERENCE in rows:
        ref = rows[REFERENCE]
        ref_q = statistics.mean(ref["scores"])
        line += (
            f" vs rank_bm25 {ref_q * 1e3:.1f} ms/query = {ref_q / q:.0f}x faster (top-100: "
            f"{statistics.mean(ref['top']) / statistics.mean(ours['top']):.0f}x); build "
            f"{ours['build']:.2f}s vs {ref['build']:.2f}s "
            f"({ref['build'] / ours['build']:.1f}x); max |score diff| {ours['diff']:.3g} "
            f"({ours['bitwise']}/{n_queries} queries bit-identical); top-100 identical "
            f"{ours['same_rank']}/{n_queries}"
        )
    line += f"; compiled and numpy paths identical {ours['paths_equal']}/{n_queries}"
    for name in rows:
        if name.startswith("bm25s"):
            other = rows[name]
            mean = statistics.mean
            med = statistics.median
            line += (
                f"; vs {name}: scores {_ratio(other['scores'], ours['scores'], mean)} (mean) "
                f"{_ratio(other['scores'], ours['scores'], med)} (median), top-100 "
                f"{_ratio(other['top'], ours['top'], med)} (median)"
            )
    print()
    print(line)


if __name__ == "__main__":
    raise SystemExit(main())
