"""The context stage's cost against a job's retrieval time at 100k passages (target: < 5%).

    .venv/bin/python benchmarks/bench_stages.py            # 100,000 passages, 1,000 queries
    .venv/bin/python benchmarks/bench_stages.py --quick    # 5,000 passages, 50 queries

Retrieval: this project's BM25 arm (SparseBM25 scores over every passage, then the top-100
pool in the project's tie-break order), the cheapest arm a job runs (dense Flat at 100k costs
more per query), so the share printed is an upper bound for a hybrid job. Passages: Chinese
chunks from `chinese_corpus.py` (cmrc2018 chunks plus synthetic ones drawn from its token
statistics), joined back into text; five consecutive chunks share a `doc_id`. Context stage:
`ContextBuilder` built once per job (the length of every passage's text, every passage's
document code) and applied to each query's top 10 with a 600-character budget and
`max_per_doc=2`, the settings of a typical RAG prompt. Both sides are timed in this process,
`--repeats` times, interleaved (retrieval, then the stage, in each repeat), taking medians.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from chinese_corpus import build_corpus

from retrieval_bench.config.stages import ContextConfig
from retrieval_bench.records import EvalQuery, Passage, Ranked, passage_text
from retrieval_bench.retrievers.bm25 import BM25Config, SparseBM25
from retrieval_bench.stages.context import ContextBuilder
from retrieval_bench.tiebreak import TieBreak

POOL = 100
TOP_K = 10
CHUNKS_PER_DOC = 5


def clock(fn: Callable[[], Any]) -> tuple[Any, float]:
    """fn's result and its wall time."""
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--budget", type=int, default=600, help="stages.context.budget_chars")
    parser.add_argument("--max-per-doc", type=int, default=2, help="stages.context.max_per_doc")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="5,000 passages, 50 queries")
    parser.add_argument("--synthetic", action="store_true", help="skip cmrc2018 (and jieba)")
    args = parser.parse_args(argv)
    if args.quick:
        args.passages, args.queries, args.repeats = 5_000, 50, 3
    start = time.perf_counter()
    corpus = build_corpus(args.passages, args.queries, synthetic_only=args.synthetic)
    queries = (corpus.queries * (args.queries // max(len(corpus.queries), 1) + 1))[: args.queries]
    passages = [
        Passage(f"p{i:07d}", "".join(tokens), doc_id=f"d{i // CHUNKS_PER_DOC}")
        for i, tokens in enumerate(corpus.passages)
    ]
    texts = [passage_text(p) for p in passages]
    index = SparseBM25(corpus.passages, BM25Config())
    tie = TieBreak([p.id for p in passages])
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    print(
        f"corpus: {len(passages):,} passages ({corpus.source}), {len(queries):,} queries, "
        f"passage text {lengths.mean():.0f} chars mean ({lengths.min()}-{lengths.max()}); "
        f"built in {time.perf_counter() - start:.1f}s"
    )

    def retrieve() -> list[Ranked]:
        out = []
        for query in queries:
            scores, matched = index.scores(query)
            top, top_scores = tie.top(matched, scores[matched], POOL)
            out.append(Ranked(top, top_scores, POOL))
        return out

    config = ContextConfig(budget_chars=args.budget, max_per_doc=args.max_per_doc)
    asked = [EvalQuery(f"q{i}", "", "bench", "reviewed") for i in range(len(queries))]
    # Interleaved: each repeat times retrieval, then the stage's build and apply, so a change
    # in the machine's load moves both sides; the share is the median of the repeats' shares.
    rows = []
    for _ in range(args.repeats):
        pools, retrieve_s = clock(retrieve)
        finals = [Ranked(r.indices[:TOP_K], r.scores[:TOP_K], TOP_K) for r in pools]
        start = time.perf_counter()
        builder = ContextBuilder(config, passages, texts)
        build_s = time.perf_counter() - start
        contexts, apply_s = clock(partial(builder.apply, asked, finals))
        rows.append((retrieve_s, build_s, apply_s, (build_s + apply_s) / retrieve_s))
    retrieve_s, build_s, apply_s, share = (
        statistics.median(row[i] for row in rows) for i in range(4)
    )
    kept = np.mean([c.returned for c in contexts])
    # Every context within the budget and the per-document cap (the stage's contract).
    documents = [p.doc_id for p in passages]
    valid = sum(
        int(lengths[c.indices].sum()) <= args.budget
        and max(np.unique([documents[i] for i in c.indices], return_counts=True)[1], default=0)
        <= args.max_per_doc
        for c in contexts
    )
    print(
        f"\nretrieval (BM25 scores + top-{POOL} pool): {retrieve_s:.3f}s "
        f"({retrieve_s / len(queries) * 1e3:.2f} ms/query)\n"
        f"context stage: build {build_s * 1e3:.1f} ms (once per job), apply "
        f"{apply_s * 1e3:.1f} ms ({apply_s / len(queries) * 1e6:.1f} us/query); "
        f"{kept:.2f} of {TOP_K} passages kept per query at {args.budget} chars, "
        f"max_per_doc {args.max_per_doc}"
    )
    print(
        f"\nRESULT stages: {len(passages):,} passages x {len(queries):,} queries: context stage "
        f"{(build_s + apply_s) * 1e3:.1f} ms = {share:.2%} of retrieval {retrieve_s:.2f}s "
        f"(target < 5%: {'met' if share < 0.05 else 'NOT met'}); within budget and cap "
        f"{valid}/{len(contexts)}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
