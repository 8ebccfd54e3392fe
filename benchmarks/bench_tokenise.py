"""Parallel tokenisation: the BM25 token cache's jieba pass at 1 worker against N workers.

    .venv/bin/python benchmarks/bench_tokenise.py                # 60,000 passages, 1 vs 2
    .venv/bin/python benchmarks/bench_tokenise.py --workers 4    # 1 vs 4
    .venv/bin/python benchmarks/bench_tokenise.py --quick        # smoke run: 3,000 passages

The corpus is Chinese text from chinese_corpus.py (cmrc2018's real chunks, then synthetic
passages from its token statistics written out as text; a synthetic Zipf vocabulary when
cmrc2018 is absent). Both runs go through `token_cache.tokenize_corpus` with the project's
jieba tokenizer and no cache, so a run is a cache miss as a first job would see it. The
one-process run starts with jieba's dictionary already loaded; the parallel run pays for
starting its workers (each imports jieba and loads the dictionary), as a job does. The token
ids of both runs are checked identical.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from chinese_corpus import build_corpus

from retrieval_bench.config.text import TextConfig
from retrieval_bench.text.token_cache import tokenize_corpus
from retrieval_bench.text.tokenizer import Tokenizer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--passages", type=int, default=60_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="3,000 passages, synthetic text")
    args = parser.parse_args()
    n = 3_000 if args.quick else args.passages

    corpus = build_corpus(n, n_queries=0, synthetic_only=args.quick)
    real = corpus.texts[: corpus.n_real] if corpus.texts else []
    texts = real + ["".join(tokens) for tokens in corpus.passages[len(real) :]]
    chars = sum(map(len, texts))
    print(f"corpus: {len(texts):,} passages, {chars:,} characters ({corpus.source})")

    tokenizer = Tokenizer(TextConfig(use_lexicon=False))
    tokenizer.tokenize("预热")  # jieba's dictionary loaded before the clock starts
    timings = {}
    results = {}
    for workers in (1, args.workers):
        start = time.perf_counter()
        results[workers] = tokenize_corpus(texts, tokenizer.tokenize, {}, None, workers)
        timings[workers] = time.perf_counter() - start
        rate = chars / timings[workers] / 1000
        print(f"workers={workers}: {timings[workers]:.2f} s ({rate:,.0f}k characters/s)")
    one, many = results[1], results[args.workers]
    same = (
        one.vocab == many.vocab
        and np.array_equal(one.ids, many.ids)
        and np.array_equal(one.lengths, many.lengths)
    )
    if not same:
        sys.exit("token ids differ between 1 and N workers")
    speedup = timings[1] / timings[args.workers]
    print(
        f"RESULT tokenise: {len(texts):,} passages, 1 worker {timings[1]:.2f} s, "
        f"{args.workers} workers {timings[args.workers]:.2f} s, {speedup:.2f}x faster "
        f"(ideal {args.workers}x), token ids identical"
    )


if __name__ == "__main__":
    main()
