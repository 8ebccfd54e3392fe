"""Dense search, RRF fusion and the shared tie-break, against brute-force references."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval_bench.fusion import ReciprocalRankFusion
from retrieval_bench.records import Ranked
from retrieval_bench.retrievers.dense import DenseRetriever
from retrieval_bench.tiebreak import TieBreak


def unit_rows(rng: np.random.Generator, n: int, dim: int = 16) -> np.ndarray:
    rows = rng.normal(size=(n, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def brute_force(
    vectors: np.ndarray, query: np.ndarray, ids: list[str], k: int, mask: np.ndarray | None
) -> list[str]:
    scores = (vectors @ query).astype(np.float64)
    allowed = range(len(ids)) if mask is None else np.flatnonzero(mask)
    ranked = sorted(allowed, key=lambda i: (-scores[i], [-ord(c) for c in ids[i]]))
    return [ids[i] for i in ranked[:k]]


@pytest.mark.parametrize("seed", [0, 1])
def test_dense_matches_brute_force_with_and_without_filter(seed: int) -> None:
    rng = np.random.default_rng(seed)
    vectors = unit_rows(rng, 300)
    vectors[50:60] = vectors[7]  # exact ties across the cut
    ids = [f"p{i:03d}" for i in range(300)]
    queries = np.vstack([vectors[7], unit_rows(rng, 5)])
    retriever = DenseRetriever(ids, vectors, lambda texts: queries[: len(texts)])
    mask = rng.random(300) < 0.4
    mask[[7, 55]] = True
    for masks in ([None] * 6, [mask] * 6, [None, mask, None, mask, None, mask]):
        results = retriever.search([str(i) for i in range(6)], 8, masks)
        for q, (ranked, m) in enumerate(zip(results, masks, strict=True)):
            assert [ids[i] for i in ranked.indices] == brute_force(vectors, queries[q], ids, 8, m)
            if m is not None:
                assert m[ranked.indices].all(), "the filter applies before ranking"
            assert ranked.requested == 8 and ranked.returned == 8


def test_dense_pool_shorter_than_requested_when_filter_leaves_few() -> None:
    rng = np.random.default_rng(3)
    vectors = unit_rows(rng, 20)
    ids = [f"d{i}" for i in range(20)]
    retriever = DenseRetriever(ids, vectors, lambda texts: vectors[: len(texts)])
    mask = np.zeros(20, dtype=bool)
    mask[[2, 9, 11]] = True
    (ranked,) = retriever.search(["q"], 10, [mask])
    assert sorted(ranked.indices.tolist()) == [2, 9, 11]
    assert ranked.requested == 10 and ranked.returned == 3
    (empty,) = retriever.search(["q"], 10, [np.zeros(20, dtype=bool)])
    assert empty.returned == 0


def test_rrf_is_sum_of_reciprocal_ranks_with_tie_break() -> None:
    ids = ["a", "b", "c", "d", "e"]
    tie_break = TieBreak(ids)
    bm25 = Ranked(np.array([0, 1, 2]), np.array([3.0, 2.0, 1.0]), requested=3)
    dense = Ranked(np.array([1, 3, 0]), np.array([0.9, 0.8, 0.7]), requested=3)
    fused = ReciprocalRankFusion(60).combine([bm25, dense], tie_break)
    expected = {
        "a": 1 / 61 + 1 / 63,
        "b": 1 / 62 + 1 / 61,
        "c": 1 / 63,
        "d": 1 / 62,
    }
    got = dict(zip([ids[i] for i in fused.indices], fused.scores, strict=True))
    assert got == pytest.approx(expected, abs=1e-15)
    assert [ids[i] for i in fused.indices] == ["b", "a", "d", "c"]
    assert fused.requested == fused.returned == 4


def test_rrf_exact_tie_is_broken_by_id_descending() -> None:
    ids = ["a", "b", "c"]
    first = Ranked(np.array([0, 1]), np.array([2.0, 1.0]), requested=2)
    second = Ranked(np.array([1, 0]), np.array([2.0, 1.0]), requested=2)
    fused = ReciprocalRankFusion(60).combine([first, second], TieBreak(ids))
    assert fused.scores[0] == fused.scores[1]
    assert [ids[i] for i in fused.indices] == ["b", "a"]


def test_tie_break_is_score_desc_then_id_desc() -> None:
    ids = ["p10", "p2", "p1", "q"]
    tie_break = TieBreak(ids)
    indices, _ = tie_break.top(np.arange(4), np.array([1.0, 1.0, 1.0, 0.5]), 4)
    assert [ids[i] for i in indices] == ["p2", "p10", "p1", "q"]
    top2, _ = tie_break.top(np.arange(4), np.array([1.0, 1.0, 1.0, 0.5]), 2)
    assert [ids[i] for i in top2] == ["p2", "p10"]
