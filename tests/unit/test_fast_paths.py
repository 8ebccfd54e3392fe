"""Correctness of the fast paths behind the benchmarks (timings live in benchmarks/, never here)."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval_bench.tiebreak import TieBreak


def brute_force_top(ids: list[str], candidates: np.ndarray, scores: np.ndarray, k: int) -> list:
    """Full sort: score descending, then id descending (negated code points sort descending)."""
    ranked = sorted(
        range(len(candidates)),
        key=lambda i: (-scores[i], [-ord(c) for c in ids[candidates[i]]]),
    )
    return [(int(candidates[i]), float(scores[i])) for i in ranked[:k]]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("k", [1, 10, 100])
def test_long_candidate_lists_keep_the_exact_top_k_and_its_ties(seed: int, k: int) -> None:
    """The block-maxima pre-filter (lists longer than 8k and 4096) must not change the result,
    with heavy ties at the cut, ties spread over blocks, and odd lengths."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5000, 20000))
    ids = [f"p{i:06d}" for i in rng.permutation(n)]
    tie_break = TieBreak(ids)
    candidates = np.sort(rng.choice(n, size=int(n * 0.9), replace=False))
    levels = [3, 50, 1000][seed % 3]  # few distinct scores = many ties across the cut
    scores = rng.integers(0, levels, len(candidates)).astype(np.float64) / 7.0
    if seed % 2:
        scores[rng.integers(0, len(scores), 5)] = scores.max()  # ties at the very top
    top_idx, top_scores = tie_break.top(candidates, scores, k)
    got = list(zip(top_idx.tolist(), top_scores.tolist(), strict=True))
    assert got == brute_force_top(ids, candidates, scores, k)


def reference_metrics(ranking: list[str], labels: dict[str, int], k: int) -> dict[str, float]:
    """Each metric straight from its definition, one query at a time."""
    top = ranking[:k]
    gains = [max(labels.get(d, 0), 0) for d in top]
    relevant = [d for d, g in labels.items() if g > 0]
    n_rel = len(relevant)
    found = sum(1 for g in gains if g > 0)
    nan = float("nan")
    first = next((i for i, g in enumerate(gains) if g > 0), None)
    dcg = sum(g / np.log2(i + 2) for i, g in enumerate(gains))
    ideal = sorted((g for g in labels.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / np.log2(i + 2) for i, g in enumerate(ideal))
    hit_ranks = [i for i, g in enumerate(gains) if g > 0]
    precisions = sum((n + 1) / (i + 1) for n, i in enumerate(hit_ranks))
    return {
        "recall": found / n_rel if n_rel else nan,
        "recall_bound": min(k, n_rel) / n_rel if n_rel else nan,
        "hit": float(found > 0),
        "all_hit": float(found == n_rel) if n_rel else nan,
        "mrr": 0.0 if first is None else 1.0 / (first + 1),
        "ndcg": dcg / idcg if idcg > 0 else nan,
        "map": precisions / n_rel if n_rel else nan,
        "precision": found / k,
        "judged": sum(1 for d in top if d in labels) / k,
    }


@pytest.mark.parametrize("seed", range(3))
def test_sparse_metrics_equal_their_definitions(seed: int) -> None:
    """Graded and negative labels, labelled ids past k, short and empty rankings, unlabelled
    queries: every metric at every cut-off equals the one-query-at-a-time definition."""
    from retrieval_bench.scoring import metrics, registry

    rng = np.random.default_rng(seed)
    pool = [f"d{i}" for i in range(60)]
    rankings, qrels = [], []
    for _ in range(400):
        ranked = rng.choice(pool, int(rng.integers(0, 40)), replace=False)
        rankings.append([str(d) for d in ranked])
        labelled = [str(d) for d in rng.choice(pool, int(rng.integers(0, 10)), replace=False)]
        grades = rng.integers(-1, 4, len(labelled)).tolist()
        qrels.append(dict(zip(labelled, grades, strict=True)))
    full = metrics.build_ranked_grades(rankings, qrels, 30)
    for k in (1, 3, 10, 30):
        rg = full.truncate(k) if k < 30 else full
        for name, fn in ((m.name, m.fn) for m in registry.measures(registry.DOC) if m.fn):
            got = fn(rg)
            want = [reference_metrics(r, q, k)[name] for r, q in zip(rankings, qrels, strict=True)]
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-12, err_msg=f"{name}@{k}")
