"""The random cases of the parity tests: qrels and runs (scoring against trec_eval), pools
(fusion against ranx), token corpora (BM25 against rank_bm25), and a random arm's answers (the
job's coded scoring against the string path). Each is a function of its seed, so a failing
case is reproduced by its seed alone."""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np

from retrieval_bench.records import EvalQuery, Ranked
from retrieval_bench.scoring.metrics import pad_rankings
from retrieval_bench.tiebreak import TieBreak
from support.fakes import Answer

Qrels = dict[str, dict[str, int]]
Run = dict[str, dict[str, float]]
Pools = list[list[Ranked]]  # per query, one pool per arm

# Mixed-length ids so that docid order (string order) differs from numeric order.
POOL = [f"d{i}" for i in range(40)] + [f"doc-{i}" for i in range(5)]
CODE = {doc: i for i, doc in enumerate(POOL)}


def random_case(
    seed: int,
    n_queries: int,
    *,
    pool: Sequence[str] = POOL,
    judged: int = 12,
    nothing_relevant: float = 0.1,
    outside: float = 0.0,
    absent: float = 0.05,
    returned: tuple[int, int] = (1, 30),
    ties: float = 0.5,
    tie_levels: int = 4,
) -> tuple[Qrels, Run]:
    """qrels and {qid: {doc: score}} over `pool`: per query 1 to `judged` - 1 judged ids with
    grades 0..3; a share `nothing_relevant` of queries judged non-relevant only (0: none, and
    each query's first judged id is made relevant); a share `outside` with a label outside
    `pool` (uncoded); a share `absent` labelled but absent from the run; runs of
    `returned[0]` to `returned[1]` - 1 ids, a share `ties` of them scored in half steps below
    `tie_levels` / 2 (heavy ties), the others by rounded normals.

    A share of 0 (or `ties` 1) draws nothing from the generator, so each setting's cases stay
    the same as long as its seed does."""
    rng = np.random.default_rng(seed)
    qrels: Qrels = {}
    run: Run = {}
    for i in range(n_queries):
        qid = f"q{i}"
        ids = rng.choice(pool, int(rng.integers(1, judged)), replace=False)
        if nothing_relevant and rng.random() < nothing_relevant:
            grades = np.zeros(len(ids), dtype=int)  # judged, but nothing relevant
        else:
            grades = rng.integers(0, 4, len(ids))
            if not nothing_relevant:
                grades[0] = max(int(grades[0]), 1)  # every query has a relevant id
        qrels[qid] = {str(d): int(g) for d, g in zip(ids, grades, strict=True)}
        if outside and rng.random() < outside:
            qrels[qid][f"outside-{i}"] = int(rng.integers(0, 3))
        if absent and rng.random() < absent:
            continue  # labelled but absent from the run
        docs = rng.choice(pool, int(rng.integers(*returned)), replace=False)
        if ties >= 1 or rng.random() < ties:
            scores = rng.integers(0, tie_levels, len(docs)) / 2.0  # many ties
        else:
            scores = np.round(rng.normal(size=len(docs)), 2)
        run[qid] = {str(d): float(s) for d, s in zip(docs, scores, strict=True)}
    return qrels, run


def coded(rankings: Sequence[Sequence[str]], code: dict[str, int] = CODE) -> np.ndarray:
    """String rankings as the padded code matrix a job scores."""
    return pad_rankings([np.array([code[d] for d in r], dtype=np.int64) for r in rankings])


def random_pools(
    seed: int, n_arms: int, ids: Sequence[str], ties: bool, empty: bool = True, queries: int = 60
) -> Pools:
    """Pools as arms return them: unique passages, best first by the project tie-break, of
    lengths 0 (now and then, when `empty`) or 1 to 40, scores with many ties when `ties`."""
    rng = np.random.default_rng(seed)
    tie_break = TieBreak(ids)
    out = []
    for _ in range(queries):
        pools = []
        for arm in range(n_arms):
            n = int(rng.integers(1, 41)) if rng.random() > 0.1 or not empty else 0
            candidates = rng.choice(len(ids), size=n, replace=False).astype(np.int64)
            if ties:
                scores = rng.integers(0, 6, size=n).astype(np.float64) * 0.5 - arm
            else:
                scores = rng.normal(loc=arm * 3.0, scale=1.0 + arm, size=n)
            indices, ordered = tie_break.top(candidates, scores, n)
            pools.append(Ranked(indices, ordered, requested=40))
        if not any(pool.returned for pool in pools):
            pools[0] = Ranked(np.array([0]), np.array([1.0]), requested=40)
        out.append(pools)
    return out


def random_corpus(seed: int, n_docs: int = 400, vocab: int = 60) -> list[list[str]]:
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(vocab)]
    # Zipf-like: a few terms occur in most documents, so some IDFs go negative.
    weights = [1.0 / (i + 1) ** 0.7 for i in range(vocab)]
    return [rng.choices(words, weights, k=rng.randint(0, 40)) for _ in range(n_docs)]


def random_answer(seed: int, n: int) -> Answer:
    """A random arm's answers (for support.fakes.ScriptedArm): per query a random subset of
    the n passages, of 0 to k of them, with tied scores, as an arm would rank them."""
    rng = np.random.default_rng(seed)

    def answer(
        queries: Sequence[EvalQuery], k: int, allowed: Sequence[np.ndarray | None]
    ) -> list[Ranked]:
        out = []
        for _ in queries:
            idx = rng.choice(n, int(rng.integers(0, k + 1)), replace=False)
            scores = np.sort(rng.integers(0, 3, len(idx)).astype(np.float64))[::-1]
            out.append(Ranked(idx.astype(np.int64), scores, k))
        return out

    return answer
