"""BM25: the sparse scorer must reproduce rank_bm25.BM25Okapi exactly."""

from __future__ import annotations

import random

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from retrieval_bench.retrievers.bm25 import BM25Config, BM25Retriever, ReferenceBM25, SparseBM25
from retrieval_bench.text import TextConfig, Tokenizer


def random_corpus(seed: int, n_docs: int = 400, vocab: int = 60) -> list[list[str]]:
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(vocab)]
    # Zipf-like: a few terms occur in most documents, so some IDFs go negative.
    weights = [1.0 / (i + 1) ** 0.7 for i in range(vocab)]
    return [rng.choices(words, weights, k=rng.randint(0, 40)) for _ in range(n_docs)]


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("params", [(1.5, 0.75, 0.25), (1.2, 0.3, 0.5), (0.5, 0.9, 0.0)])
def test_sparse_scores_equal_rank_bm25(seed: int, params: tuple[float, float, float]) -> None:
    corpus = random_corpus(seed)
    k1, b, epsilon = params
    reference = BM25Okapi(corpus, k1=k1, b=b, epsilon=epsilon)
    assert any(idf == epsilon * reference.average_idf for idf in reference.idf.values()), (
        "the corpus must exercise the epsilon floor on negative IDF"
    )
    sparse = SparseBM25(corpus, BM25Config(k1=k1, b=b, epsilon=epsilon))
    rng = random.Random(seed + 100)
    for _ in range(100):
        query = [f"w{rng.randint(0, 70)}" for _ in range(rng.randint(1, 8))]  # some unseen
        expected = reference.get_scores(query)
        scores, matched = sparse.scores(query)
        np.testing.assert_allclose(scores, expected, rtol=0, atol=1e-9)
        present = {t for t in query if t in reference.idf}
        expected_matched = [i for i, f in enumerate(reference.doc_freqs) if present & f.keys()]
        assert matched.tolist() == expected_matched


def test_rankings_identical_under_both_impls_with_ties() -> None:
    filler = [["x", "y"], ["y", "z"], ["z", "x"], ["q"]]
    corpus = [["a", "b"], ["a", "b"], ["b", "a"], ["c"], ["a", "c", "c", "d"], *filler]
    ids = ["p1", "p3", "p2", "p4", "p5", "f1", "f2", "f3", "f4"]
    results = {}
    for impl in ("sparse", "rank_bm25"):
        retriever = BM25Retriever(ids, corpus, str.split, BM25Config(impl=impl))
        (ranked,) = retriever.search(["a b"], 10, [None])
        results[impl] = [ids[i] for i in ranked.indices]
    assert results["sparse"] == results["rank_bm25"]
    # p1, p3, p2 tie on score: id descending breaks the tie, as trec_eval does.
    assert results["sparse"][:3] == ["p3", "p2", "p1"]
    assert "p4" not in results["sparse"], "a passage sharing no query term is not a candidate"


def test_filter_applies_before_ranking() -> None:
    corpus = [["a"] * 5, ["a"], ["a", "b"], ["b"], ["x"], ["y"], ["z"]]
    ids = ["d0", "d1", "d2", "d3", "d4", "d5", "d6"]
    retriever = BM25Retriever(ids, corpus, str.split, BM25Config())
    mask = np.array([False, True, True, True, True, True, True])
    (ranked,) = retriever.search(["a"], 2, [mask])
    assert [ids[i] for i in ranked.indices] == ["d1", "d2"]
    assert ranked.requested == 2 and ranked.returned == 2


def test_reference_impl_is_rank_bm25() -> None:
    corpus = random_corpus(5, n_docs=50)
    ref = ReferenceBM25(corpus, BM25Config())
    scores, _ = ref.scores(["w1", "w2"])
    np.testing.assert_array_equal(scores, BM25Okapi(corpus).get_scores(["w1", "w2"]))


def test_tokenizer_uses_lexicon_and_normalises() -> None:
    plain = Tokenizer(TextConfig(use_lexicon=False))
    with_lexicon = Tokenizer(TextConfig(), ["蜈支洲岛旅游区"])
    text = "蜈支洲岛旅游区 门票，ABC Hotel"
    assert "蜈支洲岛旅游区" in with_lexicon.tokenize(text)
    assert "蜈支洲岛旅游区" not in plain.tokenize(text)
    tokens = with_lexicon.tokenize(text)
    assert "abc" in tokens and "hotel" in tokens
    assert all(t.strip() for t in tokens) and "，" not in tokens
    assert with_lexicon.identity() != plain.identity()
