"""BM25: the sparse scorer must reproduce rank_bm25.BM25Okapi exactly."""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import pytest
from conftest import compiled_or_numpy
from rank_bm25 import BM25Okapi
from support.fused_top import check_fused_top
from support.random_cases import random_corpus

from retrieval_bench.config.text import TextConfig
from retrieval_bench.retrievers import bm25_kernel
from retrieval_bench.retrievers.bm25 import BM25Config, BM25Retriever, ReferenceBM25, SparseBM25
from retrieval_bench.text.tokenizer import Tokenizer


@pytest.fixture(autouse=True, params=["compiled", "numpy"])
def scoring_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test here runs on both of SparseBM25's scoring paths."""
    return compiled_or_numpy(request, monkeypatch, bm25_kernel, "the compiled BM25 kernel")


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


@pytest.mark.parametrize("seed", [0, 3])
def test_sparse_scores_are_bit_identical_to_rank_bm25(seed: int) -> None:
    """Same weights, same IDFs, same additions in the same order: not just close, equal."""
    corpus = random_corpus(seed, n_docs=300, vocab=80)
    reference = BM25Okapi(corpus)
    sparse = SparseBM25(corpus, BM25Config())
    assert sparse.average_idf == reference.average_idf
    rng = random.Random(seed)
    for _ in range(50):
        # Repeated tokens count twice, as rank_bm25 iterates the query list.
        query = [f"w{rng.randint(0, 90)}" for _ in range(rng.randint(1, 10))]
        query += query[:2]
        scores, _ = sparse.scores(query)
        np.testing.assert_array_equal(scores, reference.get_scores(query))


def test_negative_average_idf_floor_and_matching() -> None:
    """Most terms in most passages: the mean IDF is negative, so floored terms score < 0, and
    passages sharing only such terms are still candidates (matched is not `score > 0`)."""
    corpus = [["a", "b", "u1"], ["a", "b", "u2"], ["a", "b"], ["a", "c"]]
    reference = BM25Okapi(corpus)
    assert reference.average_idf < 0
    sparse = SparseBM25(corpus, BM25Config())
    for query in (["a"], ["b", "u1"], ["a", "a", "c"], ["zzz"], []):
        scores, matched = sparse.scores(query)
        np.testing.assert_array_equal(scores, reference.get_scores(query))
        present = {t for t in query if t in reference.idf}
        expected = [i for i, f in enumerate(reference.doc_freqs) if present & f.keys()]
        assert matched.tolist() == expected
    ids = ["p0", "p1", "p2", "p3"]
    results = {}
    for impl in ("sparse", "rank_bm25"):
        retriever = BM25Retriever(ids, corpus, str.split, BM25Config(impl=impl))
        (ranked,) = retriever.search(["a"], 10, [None])
        results[impl] = (ranked.indices.tolist(), ranked.scores.tolist())
    assert results["sparse"] == results["rank_bm25"]
    assert len(results["sparse"][0]) == 4, "every passage holding 'a' is a candidate"


def test_from_term_ids_equals_token_build() -> None:
    corpus = random_corpus(7, n_docs=120)
    built = SparseBM25(corpus, BM25Config())
    vocab = list(built.vocab)
    ids = np.array([built.vocab[t] for doc in corpus for t in doc], dtype=np.int32)
    lengths = np.array([len(doc) for doc in corpus])
    again = SparseBM25.from_term_ids(vocab, ids, lengths, BM25Config())
    assert (again.matrix != built.matrix).nnz == 0
    np.testing.assert_array_equal(again.idf, built.idf)
    assert list(again.vocab) == vocab


def test_empty_passages_and_unknown_terms() -> None:
    corpus = [[], ["a"], ["a", "b"], []]
    sparse = SparseBM25(corpus, BM25Config())
    np.testing.assert_array_equal(sparse.scores(["a"])[0], BM25Okapi(corpus).get_scores(["a"]))
    scores, matched = sparse.scores(["nope"])
    assert not scores.any() and matched.size == 0
    assert "nope" not in sparse.vocab, "a query lookup must not grow the vocabulary"


def test_aliases_become_the_canonical_entity_token() -> None:
    from retrieval_bench.records import Entity

    entities = [Entity("蜈支洲岛旅游区", ("蜈支洲岛", "蜈支洲")), Entity("Hotel ABC", ("abc",))]
    tokenizer = Tokenizer.for_entities(TextConfig(), entities)
    assert "蜈支洲岛旅游区" in tokenizer.tokenize("蜈支洲门票")
    assert "蜈支洲岛旅游区" in tokenizer.tokenize("去蜈支洲岛")
    assert "hotel abc" in tokenizer.tokenize("住 ABC")
    literal = Tokenizer.for_entities(TextConfig(canonical_entities=False), entities)
    assert "蜈支洲" in literal.tokenize("蜈支洲门票")
    assert literal.identity() != tokenizer.identity()


@pytest.mark.parametrize("epsilon", [0.25, 0.5])
def test_epsilon_floor_worked_by_hand(epsilon: float) -> None:
    """'a' is in 3 of 4 passages: its IDF ln(1.5 / 3.5) is negative, so it is floored to
    epsilon x the mean IDF over the vocabulary (BM25Okapi's rule)."""
    corpus = [["a", "b"], ["a", "c"], ["a", "d"], ["e"]]
    rare = math.log(3.5 / 1.5)
    floor = epsilon * (math.log(1.5 / 3.5) + 4 * rare) / 5
    k1, b = 1.5, 0.75
    avgdl = 7 / 4

    def term(idf: float, length: int) -> float:
        return idf * (k1 + 1) / (1 + k1 * (1 - b + b * length / avgdl))

    sparse = SparseBM25(corpus, BM25Config(k1=k1, b=b, epsilon=epsilon))
    scores, matched = sparse.scores(["a", "b"])
    assert matched.tolist() == [0, 1, 2]
    expected = [term(floor, 2) + term(rare, 2), term(floor, 2), term(floor, 2), 0.0]
    np.testing.assert_allclose(scores, expected, rtol=1e-12, atol=0)


@pytest.mark.parametrize("seed", [0, 5])
def test_fused_top_equals_scores_then_tie_break(seed: int, scoring_path: str) -> None:
    """SparseBM25.top (the compiled kernel: the sum, then only the passages at or above a
    floor from blocks' maxima or a sample) gives exactly what scores + TieBreak.top give: the
    same passages in the same order, the same scores, and whether any passage matched / was
    allowed, with filters, ties, negative IDFs and any k."""
    from retrieval_bench.tiebreak import TieBreak

    corpus = random_corpus(seed, n_docs=300, vocab=25)  # few terms: many tied scores
    sparse = SparseBM25(corpus, BM25Config())
    rng = np.random.default_rng(seed)
    tie = TieBreak([f"p{i:05d}" for i in rng.permutation(len(corpus))])
    queries = [rng.choice([f"w{i}" for i in range(30)], size=4).tolist() for _ in range(25)]
    queries += [["w0"], ["absent"], []]
    for query in queries:
        mask = rng.random(len(corpus)) < 0.3 if rng.random() < 0.5 else None
        for k in (0, 1, 7, 100, 1000):
            check_fused_top(sparse, query, k, tie, mask, scoring_path)
    assert not sparse._scratch.any(), "the kernel leaves its scratch vector zeroed"


def test_kernel_refuses_rows_outside_the_matrix(scoring_path: str) -> None:
    if scoring_path == "numpy":
        pytest.skip("the compiled kernel's own check")
    kernel = bm25_kernel._kernel()
    sparse = SparseBM25([["a", "b"], ["b"]], BM25Config())
    m, table, idf = sparse.matrix, sparse.table, sparse.idf

    def call(data: np.ndarray, table: Any, rows: list[int], n_docs: int = 2) -> Any:
        out = np.zeros(n_docs), np.empty(n_docs, int)
        return kernel.score_rows(sparse._indptr64, m.indices, data, table, idf, rows, *out)

    with pytest.raises(IndexError):
        call(m.data, table, [5])
    with pytest.raises(ValueError, match="lengths"):
        call(m.data[:-1], table, [0])
    with pytest.raises(ValueError, match="lengths"):  # a table shorter than the codes reach
        call(m.data, table[:-1], [0])
    with pytest.raises(TypeError, match="2-byte"):  # weights where codes are expected
        call(m.data.astype(np.float64), table, [0])
    with pytest.raises(TypeError, match="8-byte"):  # codes where weights are expected
        call(m.data, None, [0])
    with pytest.raises(IndexError):  # a passage beyond the score vector
        call(m.data, table, [1], n_docs=1)


def test_a_second_caller_gets_a_scratch_vector_of_its_own(scoring_path: str) -> None:
    """While one caller holds the index's scratch vector (another thread mid-query), a second
    one sums into fresh zeros: the same top as alone, and the held vector is not touched."""
    from retrieval_bench.tiebreak import TieBreak

    corpus = random_corpus(5, n_docs=200)
    sparse = SparseBM25(corpus, BM25Config())
    tie = TieBreak([f"p{i:03d}" for i in range(len(corpus))])
    query = ["w0", "w3", "w7"]
    alone = sparse.top(query, 10, tie.id_order)
    with sparse._scratch_lock:
        sparse._scratch[:] = 7.0  # what a caller mid-sum would hold
        beside = sparse.top(query, 10, tie.id_order)
        assert (sparse._scratch == 7.0).all()
    sparse._scratch[:] = 0.0
    if alone is None:
        assert scoring_path == "numpy" and beside is None
        return
    assert beside is not None
    assert np.array_equal(alone[0], beside[0]) and np.array_equal(alone[1], beside[1])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fused_top_on_a_large_zipf_corpus(seed: int, scoring_path: str) -> None:
    """Over more passages than the kernel's blocks times k, where its unmasked floor comes
    from the blocks' maxima (and the masked one from its sample): exactly scores +
    TieBreak.top, with common and rare terms, tied scores (duplicated passages) and several k."""
    from retrieval_bench.tiebreak import TieBreak

    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, 401) ** 1.1  # Zipf: a few terms in most passages
    words = rng.choice(400, size=(4000, 12), p=weights / weights.sum())
    corpus = [[f"w{i}" for i in row[: rng.integers(3, 13)]] for row in words]
    corpus += corpus[:600]  # duplicated passages: tied scores
    sparse = SparseBM25(corpus, BM25Config())
    tie = TieBreak([f"p{i:05d}" for i in rng.permutation(len(corpus))])
    for _ in range(40):
        query = [f"w{i}" for i in rng.integers(0, 400, size=rng.integers(1, 8))]
        mask = rng.random(len(corpus)) < 0.5 if rng.random() < 0.3 else None
        for k in (1, 5, 10, 50, 100):
            check_fused_top(sparse, query, k, tie, mask, scoring_path)
    assert not sparse._scratch.any(), "the kernel leaves its scratch vector zeroed"


def test_the_built_index_keeps_what_its_tokens_cost_not_the_tokens() -> None:
    """The term ids are read by the build only: the retriever keeps where they came from
    (cache or computed, cold seconds, bytes on disk) for its cost record, not the ids."""
    from dataclasses import replace

    from retrieval_bench.text.token_cache import TokenizedCorpus

    corpus = random_corpus(0)
    tokens = TokenizedCorpus.from_tokens(corpus)
    tokens = replace(tokens, cached=True, cold_seconds=2.5, disk_bytes=123)
    ids = [f"p{i}" for i in range(len(corpus))]
    retriever = BM25Retriever(ids, tokens, str.split, BM25Config())
    kept = retriever.tokens
    assert kept is not None and len(kept.ids) == 0 and kept.vocab == [] and len(kept) == 0
    cost = retriever.cost()
    assert (cost["prepare_source"], cost["prepare_cold_s"], cost["disk_bytes"]) == (
        "cache",
        2.5,
        123,
    )
    assert cost["passages"] == len(corpus)
    reference = BM25Retriever(ids, corpus, str.split, BM25Config())
    query = " ".join(corpus[3][:3])
    got, want = retriever.search([query], 5, [None]), reference.search([query], 5, [None])
    assert got[0].indices.tolist() == want[0].indices.tolist()


@pytest.mark.parametrize("seed", [0, 4])
def test_an_index_without_codes_scores_the_same(
    seed: int, scoring_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where a corpus has more distinct saturated tfs than codes (here: the limit lowered to
    0), the postings hold float64 weights: scores still bit-identical to rank_bm25, the fused
    top still scores + TieBreak.top."""
    from retrieval_bench.retrievers import bm25_build
    from retrieval_bench.tiebreak import TieBreak

    monkeypatch.setattr(bm25_build, "MAX_CODES", 0)
    corpus = random_corpus(seed, n_docs=300, vocab=25)
    sparse = SparseBM25(corpus, BM25Config())
    assert sparse.table is None and sparse.matrix.data.dtype == np.float64
    reference = BM25Okapi(corpus)
    rng = np.random.default_rng(seed)
    tie = TieBreak([f"p{i:05d}" for i in rng.permutation(len(corpus))])
    for _ in range(20):
        query = rng.choice([f"w{i}" for i in range(30)], size=rng.integers(1, 6)).tolist()
        np.testing.assert_array_equal(sparse.scores(query)[0], reference.get_scores(query))
        mask = rng.random(len(corpus)) < 0.3 if rng.random() < 0.5 else None
        for k in (1, 10, 1000):
            check_fused_top(sparse, query, k, tie, mask, scoring_path)


@pytest.mark.parametrize("common", [False, True])
def test_scores_over_several_tiles_of_passages(common: bool, scoring_path: str) -> None:
    """Past the kernel's tiles of 32,768 passages (it sums, zeroes and reads the matched
    passages tile by tile; a row's postings cross the tiles' edges) the scores are still
    rank_bm25's bit for bit, the matched passages and the fused top still exact; `common`: three
    terms in every passage, so the mean IDF is negative and matched is not `score > 0`."""
    from retrieval_bench.tiebreak import TieBreak

    rng = np.random.default_rng(7)
    n = 70_001  # three tiles, the last a partial one of an odd length
    weights = 1.0 / np.arange(1, 201) ** 1.1
    words = rng.choice(200, size=(n, 6), p=weights / weights.sum())
    lengths = rng.integers(1, 7, size=n)
    corpus = [[f"w{i}" for i in row[:length]] for row, length in zip(words, lengths, strict=True)]
    if common:
        corpus = [["a", "b", "c", f"x{j % 3}"] for j in range(n)]
    reference = BM25Okapi(corpus)
    assert (reference.average_idf < 0) == common
    sparse = SparseBM25(corpus, BM25Config())
    tie = TieBreak([f"p{i:06d}" for i in rng.permutation(n)])
    queries = [["x1", "a"], ["b", "x2", "b"]] if common else [["w0", "w1", "w5"], ["w2", "w150"]]
    for query in queries:
        scores, matched = sparse.scores(query)
        np.testing.assert_array_equal(scores, reference.get_scores(query))
        terms = set(query)
        expected = [i for i, f in enumerate(reference.doc_freqs) if terms & f.keys()]
        assert matched.tolist() == expected
        for mask in (None, rng.random(n) < 0.5):
            check_fused_top(sparse, query, 100, tie, mask, scoring_path)
