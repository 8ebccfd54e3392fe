"""BGE-M3's three scores and their fusion on hand-made outputs, in process: no model, so the
scoring rules themselves (ColBERT's max-sim averaged over query tokens, the sparse arm's
pool of passages sharing a token, `arms.m3.weights` in dense, sparse, ColBERT order) are pinned by
fast tests; tests/test_m3_arms.py checks the same against FlagEmbedding on a real (tiny) model.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from retrieval_bench.encoders.m3 import M3Outputs
from retrieval_bench.records import NO_MATCHING_TERMS, EvalQuery
from retrieval_bench.retrievers.m3 import M3Arm, M3Scorer
from retrieval_bench.tiebreak import shared_tie_break

IDS = ["p0", "p1", "p2"]


def outputs(
    dense: list[list[float]], sparse: list[dict[int, float]], colbert: list[list[list[float]]]
) -> M3Outputs:
    indptr, indices, data = [0], [], []
    for weights in sparse:
        for token, weight in sorted(weights.items()):
            indices.append(token)
            data.append(weight)
        indptr.append(len(indices))
    offsets = np.cumsum([0, *(len(tokens) for tokens in colbert)])
    return M3Outputs(
        dense=np.array(dense, dtype=np.float32),
        sparse_indptr=np.array(indptr, dtype=np.int64),
        sparse_indices=np.array(indices, dtype=np.int64),
        sparse_data=np.array(data, dtype=np.float32),
        colbert_vectors=np.array([v for tokens in colbert for v in tokens], dtype=np.float32),
        colbert_offsets=offsets.astype(np.int64),
    )


CORPUS = outputs(
    dense=[[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]],
    sparse=[{1: 0.5, 2: 0.2}, {3: 0.7}, {2: 0.4}],
    colbert=[
        [[1.0, 0.0], [0.0, 1.0]],
        [[0.5, 0.5]],
        [[0.2, 0.9], [0.9, 0.1], [-1.0, 0.0]],
    ],
)
QUERY = outputs(
    dense=[[0.8, 0.6]],
    sparse=[{2: 1.5}],  # shares token 2 with p0 and p2; p1 shares nothing
    colbert=[[[1.0, 0.0], [0.3, 0.7]]],
)


class Lookup:
    """The arm's query outputs: every query text is the one hand-made query."""

    def lookup(self, texts: Any) -> list[tuple[M3Outputs, int]]:
        return [(QUERY, 0) for _ in texts]


def arm(mode: str, weights: tuple[float, float, float] = (0.4, 0.2, 0.4)) -> M3Arm:
    queries: Any = Lookup()
    return M3Arm("m3", mode, weights, 0, M3Scorer(CORPUS), queries, shared_tie_break(IDS), {})


def scores_by_id(mode: str, **kwargs: Any) -> dict[str, float]:
    [ranked] = arm(mode, **kwargs).search([EvalQuery("q", "q", "t", "reviewed")], 3, [None])
    return {IDS[i]: float(s) for i, s in zip(ranked.indices, ranked.scores, strict=True)}


def expected_colbert(p: int) -> float:
    """Max-sim: each query token's best inner product with the passage's tokens, averaged
    over the query's tokens (BGE-M3's colbert_score)."""
    q = QUERY.colbert(0).astype(np.float64)
    tokens = CORPUS.colbert(p).astype(np.float64)
    return float(np.mean([max(float(t @ v) for t in tokens) for v in q]))


def test_colbert_is_max_sim_averaged_over_query_tokens() -> None:
    got = scores_by_id("colbert")
    assert got == pytest.approx({pid: expected_colbert(i) for i, pid in enumerate(IDS)}, abs=1e-6)


def test_the_sparse_arm_returns_only_passages_sharing_a_token() -> None:
    got = scores_by_id("sparse")
    assert got == pytest.approx({"p0": 1.5 * 0.2, "p2": 1.5 * 0.4}, abs=1e-6)  # p1: no token
    no_match = outputs([[1.0, 0.0]], [{9: 1.0}], [[[1.0, 0.0]]])

    class Other(Lookup):
        def lookup(self, texts: Any) -> list[tuple[M3Outputs, int]]:
            return [(no_match, 0) for _ in texts]

    lonely = arm("sparse")
    lonely.queries = Other()  # type: ignore[assignment]
    [ranked] = lonely.search([EvalQuery("q", "q", "t", "reviewed")], 3, [None])
    assert (ranked.returned, ranked.empty_reason) == (0, NO_MATCHING_TERMS)


def test_m3_weights_are_dense_sparse_colbert_in_that_order() -> None:
    dense = {pid: float(CORPUS.dense[i] @ QUERY.dense[0]) for i, pid in enumerate(IDS)}
    sparse = {"p0": 1.5 * 0.2, "p1": 0.0, "p2": 1.5 * 0.4}
    colbert = {pid: expected_colbert(i) for i, pid in enumerate(IDS)}
    weights = (0.5, 0.3, 0.2)
    got = scores_by_id("all", weights=weights)
    fused = {
        pid: (weights[0] * dense[pid] + weights[1] * sparse[pid] + weights[2] * colbert[pid])
        / sum(weights)
        for pid in IDS
    }
    assert got == pytest.approx(fused, abs=1e-6)
