"""Tokenisation: jieba against the compiled cut (text.impl), then 1 worker against N.

    .venv/bin/python benchmarks/bench_tokenise.py                # 60,000 passages
    .venv/bin/python benchmarks/bench_tokenise.py --candidates   # + the package index's others
    .venv/bin/python benchmarks/bench_tokenise.py --workers 4    # 1 vs 4 workers
    .venv/bin/python benchmarks/bench_tokenise.py --quick        # smoke run: 3,000 passages

The corpus is Chinese text from chinese_corpus.py (cmrc2018's real chunks, then synthetic
passages from its token statistics written out as text; a synthetic Zipf vocabulary when
cmrc2018 is absent).

1. Implementations, side by side in this process: the project's Tokenizer with
   `text.impl=jieba` (jieba's own Python) and `text.impl=fast` (the compiled cut,
   segment/_dagcut.c), each over the whole corpus, alternating `--repeats` times, timed in
   CPU seconds of this process (time.process_time: other work on a shared machine counts
   against neither); the fastest pass of each. The token lists must be identical (the script
   exits non-zero otherwise). Also the raw cut alone (`lcut` against jieba's `lcut`).
2. With `--candidates`: every other segmenter of the package index that is installed here
   (rjieba, jieba_fast, jieba_fast_dat, jieba_next, jieba3), raw cut against jieba's `lcut` on
   cmrc2018's paragraphs, no user dictionary: speed and the number of paragraphs cut
   differently, with the first difference.
3. Workers: `token_cache.tokenize_corpus` (the token cache's miss path) at 1 worker against
   `--workers`, with `--impl` (default fast); token ids checked identical.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from chinese_corpus import CMRC, build_corpus

from retrieval_bench.config.text import TextConfig
from retrieval_bench.text.token_cache import tokenize_corpus
from retrieval_bench.text.tokenizer import Tokenizer


def best_cpu(passes: dict[str, Callable[[], Any]], repeats: int) -> dict[str, float]:
    """Fastest CPU time of each callable over `repeats` alternating rounds."""
    best = dict.fromkeys(passes, float("inf"))
    for _ in range(repeats):
        for name, run in passes.items():
            start = time.process_time()
            run()
            best[name] = min(best[name], time.process_time() - start)
    return best


def compare_impls(texts: Sequence[str], repeats: int) -> None:
    chars = sum(map(len, texts))
    reference = Tokenizer(TextConfig(use_lexicon=False, impl="jieba"))
    fast = Tokenizer(TextConfig(use_lexicon=False, impl="fast_strict"))
    reference.tokenize("预热")  # jieba's dictionary loaded before any clock
    fast.tokenize("预热")
    out: dict[str, list[list[str]]] = {}

    def tokens(tokenizer: Tokenizer, name: str) -> Callable[[], None]:
        def run() -> None:
            out[name] = [tokenizer.tokenize(t) for t in texts]

        return run

    times = best_cpu({"jieba": tokens(reference, "jieba"), "fast": tokens(fast, "fast")}, repeats)
    if out["jieba"] != out["fast"]:
        pairs = enumerate(zip(out["jieba"], out["fast"], strict=True))
        bad = next(i for i, (a, b) in pairs if a != b)
        sys.exit(f"tokens differ at passage {bad}: {out['jieba'][bad]} vs {out['fast'][bad]}")
    cut_times = best_cpu(
        {
            "jieba lcut": lambda: [reference.cut(t, reference=True) for t in texts],
            "fast lcut": lambda: [fast.cut(t) for t in texts],
        },
        repeats,
    )
    print(f"\n{'implementation':<34}{'CPU s':>8}{'k chars/s':>11}{'vs jieba':>10}")
    rows = [
        ("Tokenizer, text.impl=jieba", times["jieba"], times["jieba"]),
        ("Tokenizer, text.impl=fast", times["fast"], times["jieba"]),
        ("raw cut: jieba lcut", cut_times["jieba lcut"], cut_times["jieba lcut"]),
        ("raw cut: fast lcut", cut_times["fast lcut"], cut_times["jieba lcut"]),
    ]
    for name, seconds, base in rows:
        print(f"{name:<34}{seconds:>8.2f}{chars / seconds / 1000:>11,.0f}{base / seconds:>9.1f}x")
    print(
        f"RESULT tokenise-impl: {len(texts):,} passages, {chars:,} characters: text.impl=fast "
        f"{times['fast']:.2f} CPU s vs jieba {times['jieba']:.2f} = "
        f"{times['jieba'] / times['fast']:.1f}x faster (raw cut "
        f"{cut_times['jieba lcut'] / cut_times['fast lcut']:.1f}x), best of {repeats}; "
        "tokens identical"
    )


CANDIDATES: dict[str, Callable[[], Callable[[str], list[str]]]] = {
    "rjieba": lambda: importlib.import_module("rjieba").cut,
    "jieba_fast": lambda: importlib.import_module("jieba_fast").Tokenizer().lcut,
    "jieba_fast_dat": lambda: importlib.import_module("jieba_fast_dat").lcut,
    "jieba_next": lambda: importlib.import_module("jieba_next").Tokenizer().lcut,
    "jieba3": lambda: importlib.import_module("jieba3").jieba3().cut_text,
}


def compare_candidates(texts: Sequence[str]) -> None:
    """Other segmenters of the package index, raw cut against jieba's, where installed."""
    import jieba

    from retrieval_bench.text.segment.engine import FastCut

    jieba.setLogLevel(logging.WARNING)
    reference = jieba.Tokenizer()
    reference.lcut("预热")
    start = time.process_time()
    expected = [reference.lcut(t) for t in texts]
    jieba_s = time.process_time() - start
    print(f"\ncandidates on {len(texts):,} cmrc2018 paragraphs, raw cut, no user dictionary")
    print(f"{'segmenter':<22}{'CPU s':>8}{'vs jieba':>10}{'differ':>9}  first difference")
    print(f"{'jieba 0.42.1':<22}{jieba_s:>8.2f}{1:>9.1f}x{0:>9}")
    fast = FastCut(reference)
    makers = {"this project (fast)": lambda: fast.lcut, **CANDIDATES}
    for name, make in makers.items():
        try:
            cut = make()
            cut("预热")
        except Exception as exc:  # not installed, or broken on this Python
            print(f"{name:<22}{'-':>8}{'-':>10}{'-':>9}  not available ({type(exc).__name__})")
            continue
        start = time.process_time()
        got = [list(cut(t)) for t in texts]
        seconds = time.process_time() - start
        bad = [i for i, (a, b) in enumerate(zip(expected, got, strict=True)) if a != b]
        first = ""
        if bad:
            a, b = expected[bad[0]], got[bad[0]]
            words = enumerate(zip(a, b, strict=False))
            at = next((j for j, (x, y) in words if x != y), min(len(a), len(b)))
            first = f"#{bad[0]}: jieba {a[at : at + 3]} vs {b[at : at + 3]}"
        print(f"{name:<22}{seconds:>8.2f}{jieba_s / seconds:>9.1f}x{len(bad):>9}  {first}")


def compare_workers(texts: Sequence[str], workers: int, impl: str) -> None:
    chars = sum(map(len, texts))
    tokenizer = Tokenizer(TextConfig(use_lexicon=False, impl=impl))
    tokenizer.tokenize("预热")  # dictionary and engine loaded before the clock starts
    timings = {}
    results = {}
    for count in (1, workers):
        start = time.perf_counter()
        results[count] = tokenize_corpus(texts, tokenizer.tokenize, {}, None, count)
        timings[count] = time.perf_counter() - start
        rate = chars / timings[count] / 1000
        print(f"text.impl={impl} workers={count}: {timings[count]:.2f} s ({rate:,.0f}k chars/s)")
    one, many = results[1], results[workers]
    same = (
        one.vocab == many.vocab
        and np.array_equal(one.ids, many.ids)
        and np.array_equal(one.lengths, many.lengths)
    )
    if not same:
        sys.exit("token ids differ between 1 and N workers")
    speedup = timings[1] / timings[workers]
    print(
        f"RESULT tokenise: {len(texts):,} passages, text.impl={impl}, 1 worker "
        f"{timings[1]:.2f} s, {workers} workers {timings[workers]:.2f} s, {speedup:.2f}x "
        f"faster (ideal {workers}x), token ids identical"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--passages", type=int, default=60_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--impl", default="fast", help="text.impl of the workers comparison")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--candidates", action="store_true", help="other segmenters too")
    parser.add_argument("--quick", action="store_true", help="3,000 passages, synthetic text")
    args = parser.parse_args()
    n = 3_000 if args.quick else args.passages

    load = os.getloadavg()
    print(
        f"machine: {os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    corpus = build_corpus(n, n_queries=0, synthetic_only=args.quick)
    real = corpus.texts[: corpus.n_real] if corpus.texts else []
    texts = real + ["".join(tokens) for tokens in corpus.passages[len(real) :]]
    chars = sum(map(len, texts))
    print(f"corpus: {len(texts):,} passages, {chars:,} characters ({corpus.source})")
    compare_impls(texts, 1 if args.quick else args.repeats)
    if args.candidates:
        if (CMRC / "corpus.jsonl").is_file():
            with open(CMRC / "corpus.jsonl", encoding="utf-8") as fh:
                paragraphs = [json.loads(line)["text"] for line in fh]
            compare_candidates(paragraphs)
        else:
            print(f"\ncandidates: skipped ({CMRC} is absent)")
    compare_workers(texts, args.workers, args.impl)
    load = os.getloadavg()
    print(f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
