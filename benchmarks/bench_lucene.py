"""BM25 with Lucene's formula: the project's kernel against the real Lucene and against its own
default formula, side by side in one run, on one thread.

    .venv/bin/python benchmarks/bench_lucene.py            # SciFact, 100,000 synthetic passages
    .venv/bin/python benchmarks/bench_lucene.py --million  # SciFact, 1,000,000 synthetic passages
    .venv/bin/python benchmarks/bench_lucene.py --quick    # smoke run: 3,000 synthetic, 20 queries

SciFact is read from ../shared/benchmarks/scifact where it is there.

Sets: SciFact's passages and test queries through Lucene's English analyzer (the project's copy,
text/lucene_analysis.py), and the synthetic Chinese corpus of the BM25 benchmarks
(chinese_corpus.py: cmrc2018 chunks plus passages drawn from its jieba statistics, cmrc2018's
questions as queries). Both engines index the same terms (Lucene pretokenized, whitespace
analyzer), k1 0.9, b 0.4.

1. `variant=lucene` against the default (rank_bm25's formula) on the same index build:
   ms per query for the scores over every passage and for the top 100, the two variants
   interleaved query by query (`--rounds` passes, the fastest of each kept). Goal: within 10%.
2. The project's top 100 (`variant=lucene`, one thread) against Anserini's SearchCollection
   (`-threads 1`, `-hits 100`, Lucene's own scores: `-arbitraryScoreTieBreak`). Lucene's time is
   its own: the `N queries processed in ... = ~X q/s` line SearchCollection logs, timed around
   its search loop (System.nanoTime), after the JVM has started and the index is open; the JVM's
   own compiler and garbage collector threads run beside it. The queries are sent `--repeat`
   times in one call, so the JIT's warm-up is a small share of Lucene's time.
3. Exactness: per query, the two top-100 lists agree when, ordered the project's way (score
   descending, id descending) over the 6 decimals Anserini prints, their passages above the
   lowest score and all 100 printed scores are the same.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Callable, Sequence
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from chinese_corpus import build_corpus
from timing import add_rounds, interleaved, timed

from retrieval_bench.retrievers.anserini import run_anserini
from retrieval_bench.retrievers.bm25 import BM25Config, SparseBM25
from retrieval_bench.retrievers.lucene import LuceneIndex
from retrieval_bench.tiebreak import TieBreak

ROOT = Path(__file__).resolve().parents[1]
SCIFACT = ROOT.parent / "shared" / "benchmarks" / "scifact"
TOP = 100
K1, B = 0.9, 0.4
Tokens = Sequence[Sequence[str]]


def java_f(value: float) -> str:
    """Java's `%f` of a float (Anserini's run file): its double's shortest digits, half up."""
    widened = float(np.float32(value))
    return str(Decimal(repr(widened)).quantize(Decimal("0.000001"), rounding=ROUND_HALF_UP))


def scifact_set(max_queries: int | None) -> tuple[str, str, list[list[str]], list[list[str]]]:
    from retrieval_bench.text.lucene_analysis import EnglishAnalyzer

    english = EnglishAnalyzer()
    passages = []
    for line in (SCIFACT / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        doc = json.loads(line)
        text = f"{doc['title']}\n{doc['text']}" if doc.get("title") else doc["text"]
        passages.append(english.tokenize(text))
    judged = {
        line.split("\t")[0]
        for line in (SCIFACT / "qrels" / "test.tsv").read_text().splitlines()[1:]
    }
    queries = []
    for line in (SCIFACT / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        query = json.loads(line)
        if query["_id"] in judged:
            queries.append(english.tokenize(query["text"]))
    return "scifact", "SciFact (English analyzer)", passages, queries[:max_queries]



def lucene_search(index: LuceneIndex, queries: Tokens, repeat: int) -> tuple[float, list[Any]]:
    """Lucene's own queries per second over `repeat` passes of the queries in one JVM, and the
    first pass's (ids, printed scores) per query."""
    rate = float("nan")
    with tempfile.TemporaryDirectory(prefix="bench-lucene-") as folder:
        topics, run = Path(folder) / "topics.tsv", Path(folder) / "run.txt"
        lines = [
            f"{r}_{i}\t{' '.join(q) or '-'}\n" for r in range(repeat) for i, q in enumerate(queries)
        ]
        topics.write_text("".join(lines), encoding="utf-8")
        found: list[str] = []
        run_anserini(
            "search.SearchCollection",
            [
                *("-index", str(index.path / "index"), "-topics", str(topics)),
                *("-topicReader", "TsvString", "-output", str(run), "-bm25"),
                *("-bm25.k1", str(K1), "-bm25.b", str(B), "-hits", str(TOP), "-threads", "1"),
                *("-pretokenized", "-arbitraryScoreTieBreak"),
            ],
            lambda line: found.append(line) if "q/s" in line else None,
            "4g",
        )
        for line in found:
            rate = float(line.rsplit("~", 1)[1].split()[0])
        lists: list[tuple[list[str], list[str]]] = [([], []) for _ in queries]
        for line in run.read_text(encoding="utf-8").splitlines():
            qid, _, pid, _, score, _ = line.split(" ")
            r, i = map(int, qid.split("_"))
            if r == 0:
                lists[i][0].append(pid)
                lists[i][1].append(score)
    return rate, lists


def agree(
    ours: tuple[np.ndarray, np.ndarray], theirs: tuple[list[str], list[str]], ids: list[str]
) -> bool:
    """Whether the two top-100 lists agree (module docstring, 3.)."""
    our_ids = [ids[i] for i in ours[0]]
    our_scores = [java_f(s) for s in ours[1]]
    if sorted(our_scores, key=Decimal, reverse=True) != theirs[1]:
        return False
    if not theirs[1]:
        return True
    lowest = Decimal(theirs[1][-1])

    def above(pids: list[str], scores: list[str]) -> list[tuple[Decimal, str]]:
        pairs = [(Decimal(s), p) for p, s in zip(pids, scores, strict=True) if Decimal(s) > lowest]
        return sorted(pairs, reverse=True)

    return above(our_ids, our_scores) == above(*theirs)


def run_set(
    key: str, name: str, passages: Tokens, queries: Tokens, rounds: int, repeat: int
) -> None:
    n_tokens = sum(map(len, passages))
    print(f"\n== {name}: {len(passages):,} passages, {n_tokens:,} tokens, {len(queries)} queries")
    ids = [f"p{i:08d}" for i in range(len(passages))]
    tie = TieBreak(ids)
    default, default_s = timed(lambda: SparseBM25(passages, BM25Config(k1=K1, b=B)))
    lucene, lucene_s = timed(
        lambda: SparseBM25(passages, BM25Config(k1=K1, b=B, variant="lucene"))
    )
    print(f"index build: default {default_s:.1f} s, lucene variant {lucene_s:.1f} s")

    def top_of(scorer: SparseBM25) -> Callable[[Sequence[str]], Any]:
        return lambda q: scorer.top(q, TOP, tie.id_order)

    best = interleaved(
        {
            "default scores": default.scores,
            "lucene scores": lucene.scores,
            "default top": top_of(default),
            "lucene top": top_of(lucene),
        },
        queries,
        rounds,
    )
    ms = {key: 1000 * statistics.mean(values) for key, values in best.items()}
    print(
        f"scores over every passage: default {ms['default scores']:.3f} ms/q, lucene variant "
        f"{ms['lucene scores']:.3f} ms/q, ratio {ms['lucene scores'] / ms['default scores']:.2f}x"
    )
    print(
        f"top {TOP}: default {ms['default top']:.3f} ms/q, lucene variant "
        f"{ms['lucene top']:.3f} ms/q, ratio {ms['lucene top'] / ms['default top']:.2f}x"
    )
    with tempfile.TemporaryDirectory(prefix="bench-lucene-cache-") as cache:
        index, index_s = timed(
            lambda: LuceneIndex.build(
                ids, [" ".join(p) for p in passages], "pretokenized", {}, Path(cache), "4g"
            )
        )
        print(f"Lucene index build (IndexCollection, 1 thread, with JVM start): {index_s:.1f} s")
        rate, lists = lucene_search(index, queries, repeat)
    ours_rate = 1000 / ms["lucene top"]
    same = sum(
        agree(lucene.top(q, TOP, tie.id_order)[:2], lists[i], ids) for i, q in enumerate(queries)
    )
    print(
        f"RESULT {key}: {name}: project top-{TOP} {ours_rate:,.0f} q/s vs Lucene {rate:,.0f} q/s "
        f"(one thread each; Lucene's own timer, {repeat} passes): {ours_rate / rate:.2f}x; "
        f"lucene/default variant: scores {ms['lucene scores'] / ms['default scores']:.2f}x, "
        f"top-{TOP} {ms['lucene top'] / ms['default top']:.2f}x; "
        f"top-{TOP} identical {same}/{len(queries)}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=100_000, help="synthetic passages")
    parser.add_argument("--queries", type=int, default=300)
    add_rounds(parser, 3, "timed passes over the queries (the project's side)")
    parser.add_argument("--repeat", type=int, default=5, help="passes of the queries in Lucene")
    parser.add_argument("--quick", action="store_true", help="3,000 passages, 20 queries")
    parser.add_argument("--million", action="store_true", help="1,000,000 synthetic passages")
    parser.add_argument("--no-scifact", action="store_true", help="the synthetic set only")
    args = parser.parse_args(argv)
    if args.quick:
        args.passages, args.queries, args.rounds, args.repeat = 3_000, 20, 1, 1
        args.no_scifact = True
    if args.million:
        args.passages = 1_000_000
    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f}")
    if not args.no_scifact and SCIFACT.is_dir():
        run_set(*scifact_set(None), args.rounds, args.repeat)
    elif not args.no_scifact:
        print(f"SciFact is not at {SCIFACT}: the synthetic set only")
    corpus = build_corpus(args.passages, args.queries, synthetic_only=args.quick)
    run_set(
        "synthetic",
        f"synthetic Chinese ({corpus.source})",
        corpus.passages,
        corpus.queries,
        args.rounds,
        args.repeat,
    )
    load = os.getloadavg()
    print(f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
