"""Scoring: this project's scorer against pytrec_eval (trec_eval) and ranx, side by side.

    .venv/bin/python benchmarks/bench_scorer.py            # 100,000 queries x 100 results
    .venv/bin/python benchmarks/bench_scorer.py --quick    # smoke run: 2,000 queries

One synthetic run: every query ranks 100 distinct passages with distinct scores (so every tool
sees the same order), and has 1-8 graded labels (0-3; some judged non-relevant, some relevant
passages not retrieved). Core metrics at K = 10 and 100: recall, precision, hit (success),
nDCG (trec_eval ndcg_cut, linear gain) and MRR@100 (= trec_eval recip_rank on 100 results).

Each tool is timed from its own native Python input (built before the clock starts) to
per-query values: ours = `per_query_columns` (the vectorised core) and `score_stage` (the full
job output: per-query records, overall and per-type aggregates); pytrec_eval =
RelevanceEvaluator + evaluate; ranx = Qrels/Run construction + evaluate, after a numba warm-up
on a small run (its first call compiles numba code), reported with and without building its
Qrels/Run objects from the dicts. Values are compared per query.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from retrieval_bench.scoring.aggregate import per_query_columns, score_stage
from retrieval_bench.scoring.labels import judge_qrels

DEPTH = 100
CUTOFFS = (10, 100)
# ours -> (pytrec_eval measure, ranx metric); mrr only at 100, where it equals recip_rank
METRICS = {
    **{f"recall@{k}": (f"recall_{k}", f"recall@{k}") for k in CUTOFFS},
    **{f"precision@{k}": (f"P_{k}", f"precision@{k}") for k in CUTOFFS},
    **{f"hit@{k}": (f"success_{k}", f"hit_rate@{k}") for k in CUTOFFS},
    **{f"ndcg@{k}": (f"ndcg_cut_{k}", f"ndcg@{k}") for k in CUTOFFS},
    "mrr@100": ("recip_rank", "mrr@100"),
}


def synthetic_run(n_queries: int, seed: int = 0) -> tuple[dict, dict]:
    """(qrels {qid: {doc: grade}}, run {qid: [(doc, score)] best first}), vectorised."""
    rng = np.random.default_rng(seed)
    pool = 1_000_000
    docs = np.empty((n_queries, DEPTH), dtype=np.int64)
    for start in range(0, n_queries, 10_000):  # distinct ids per row, drawn in blocks
        rows = min(10_000, n_queries - start)
        block = rng.integers(0, pool, size=(rows, DEPTH * 2))
        block.sort(axis=1)
        keep = np.ones_like(block, dtype=bool)
        keep[:, 1:] = block[:, 1:] != block[:, :-1]
        for r in range(rows):
            uniq = block[r][keep[r]]
            docs[start + r] = rng.permutation(uniq)[:DEPTH]
    # Distinct integer scores: trec_eval keeps scores as C floats (single precision), so
    # doubles closer than float32 resolution would tie there and be reordered by docid.
    scores = np.tile(np.arange(DEPTH, 0, -1, dtype=np.float64), (n_queries, 1))
    n_labels = rng.integers(1, 9, n_queries)
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, list[tuple[str, float]]] = {}
    for i in range(n_queries):
        qid = f"q{i}"
        ids = [f"d{d}" for d in docs[i].tolist()]
        run[qid] = list(zip(ids, scores[i].tolist(), strict=True))
        # Labels: mostly passages the run holds (at skewed ranks), some it missed.
        ranks = np.minimum(rng.geometric(0.08, n_labels[i]) - 1, DEPTH - 1)
        labelled = {ids[r] for r in ranks.tolist()}
        labelled |= {f"m{i}_{j}" for j in range(int(rng.integers(0, 2)))}
        grades = rng.integers(0, 4, len(labelled)).tolist()
        qrels[qid] = dict(zip(sorted(labelled), grades, strict=True))
        if not any(g > 0 for g in grades):
            qrels[qid][sorted(labelled)[0]] = 1
    return qrels, run


def clock(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--quick", action="store_true", help="2,000 queries")
    parser.add_argument("--no-ranx", action="store_true", help="leave ranx out")
    args = parser.parse_args(argv)
    n = 2_000 if args.quick else args.queries

    (qrels, run), gen_s = clock(lambda: synthetic_run(n))
    print(
        f"run: {n:,} queries x {DEPTH} results, {sum(map(len, qrels.values())):,} labels; "
        f"generated in {gen_s:.1f}s"
    )
    qids = list(run)
    rankings = {q: [d for d, _ in pairs] for q, pairs in run.items()}
    judgements = judge_qrels(qrels)
    ranked = [rankings[q] for q in qids]
    labels = [qrels[q] for q in qids]
    # Every tool's native input is built before any clock starts, then frozen out of the
    # garbage collector: its 10M entries are the benchmark's, not any tool's, to traverse.
    trec_run = {q: dict(pairs) for q, pairs in run.items()}
    ranx_input = {qid: dict(pairs) for qid, pairs in run.items()}
    gc.collect()
    gc.freeze()
    times: dict[str, float] = {}
    values: dict[str, dict[str, np.ndarray]] = {}

    columns, times["this project: per_query_columns"] = clock(
        lambda: per_query_columns(ranked, labels, CUTOFFS, qids)
    )
    ours = {name: columns[name] for name in METRICS}
    # The floor of any scorer that checks every ranking for duplicate ids (as DESIGN.md
    # requires): one set() per ranking, i.e. touching every ranked id string once.
    _, floor = clock(lambda: [len(set(r)) != len(r) for r in ranked])
    full, times["this project: score_stage (full job output)"] = clock(
        lambda: score_stage(rankings, judgements, list(CUTOFFS))
    )
    assert full["counts"]["scored"] == n

    import pytrec_eval

    measures = {"recall.10,100", "P.10,100", "success.10,100", "ndcg_cut.10,100", "recip_rank"}

    def trec() -> dict:
        return pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(trec_run)

    result, times["pytrec_eval"] = clock(trec)
    values["pytrec_eval"] = {
        ours_name: np.array([result[q][measure] for q in qids])
        for ours_name, (measure, _) in METRICS.items()
    }
    del result

    ranx_warmup = 0.0
    if not args.no_ranx:
        from ranx import Qrels, Run, evaluate

        small_q, small_r = synthetic_run(50, seed=1)
        metric_names = [m for _, m in METRICS.values()]

        def ranx_once(q: dict, r: dict) -> Any:
            ranx_run = Run({qid: dict(pairs) for qid, pairs in r.items()})
            evaluate(Qrels(q), ranx_run, metric_names, return_mean=False)
            return ranx_run

        _, ranx_warmup = clock(lambda: ranx_once(small_q, small_r))

        (ranx_qrels, ranx_run), build = clock(lambda: (Qrels(qrels), Run(ranx_input)))
        _, run_s = clock(lambda: evaluate(ranx_qrels, ranx_run, metric_names, return_mean=False))
        times["ranx (after warm-up)"] = build + run_s
        times["  of which ranx evaluate alone"] = run_s
        values["ranx"] = {
            ours_name: np.array([ranx_run.scores[metric][q] for q in qids])
            for ours_name, (_, metric) in METRICS.items()
        }

    report(n, times, ours, values, ranx_warmup)
    print(
        f"floor: the duplicate check alone (one set() per ranking) takes {floor:.2f}s, "
        f"pytrec_eval / {times['pytrec_eval'] / floor:.1f}"
    )
    return 0


def report(
    n: int,
    times: dict[str, float],
    ours: dict[str, np.ndarray],
    values: dict[str, dict[str, np.ndarray]],
    ranx_warmup: float,
) -> None:
    ref = times["pytrec_eval"]
    print()
    print(
        f"Scoring {n:,} queries x {DEPTH} results, {len(METRICS)} metric columns "
        f"(recall, precision, hit, ndcg @10 and @100; mrr@100)"
    )
    header = f"{'scorer':<46}{'seconds':>9}{'us/query':>10}{'vs pytrec_eval':>16}"
    print(header)
    print("-" * len(header))
    for name, seconds in times.items():
        print(f"{name:<46}{seconds:>9.2f}{seconds / n * 1e6:>10.1f}{ref / seconds:>15.2f}x")
    if ranx_warmup:
        print(f"{'ranx numba warm-up (first call, 50 queries)':<46}{ranx_warmup:>9.2f}")
    print()
    for tool, theirs in values.items():
        worst = max(float(np.max(np.abs(ours[m] - theirs[m]))) for m in METRICS)
        print(f"max |ours - {tool}| over {n:,} queries x {len(METRICS)} metrics: {worst:.3g}")
    full = times["this project: score_stage (full job output)"]
    core = times["this project: per_query_columns"]
    worst = max(float(np.max(np.abs(ours[m] - values["pytrec_eval"][m]))) for m in METRICS)
    line = (
        f"RESULT scorer: {n:,} queries x {DEPTH}: this project {core:.2f}s "
        f"(full score_stage {full:.2f}s) vs pytrec_eval {ref:.2f}s = {ref / core:.1f}x faster "
        f"({ref / full:.1f}x with the full output)"
    )
    if "ranx (after warm-up)" in times:
        line += f", ranx {times['ranx (after warm-up)']:.2f}s + {ranx_warmup:.0f}s warm-up"
    print()
    print(f"{line}; max |diff| vs pytrec_eval {worst:.3g}")


if __name__ == "__main__":
    sys.exit(main())
