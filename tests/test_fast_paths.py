"""Correctness of the fast paths behind the benchmarks (timings live in benchmarks/, never here)."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval_bench.retrievers.base import TieBreak


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
