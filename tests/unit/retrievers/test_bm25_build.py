"""The chunked BM25 index build (retrievers.bm25_build): the same index, bit for bit, whatever
the chunk size, and each row the very weights rank_bm25 forms."""

from __future__ import annotations

import random

import numpy as np
import pytest
from rank_bm25 import BM25Okapi
from test_bm25 import random_corpus

from retrieval_bench.retrievers.bm25 import BM25Config, BM25Retriever, SparseBM25
from retrieval_bench.retrievers.bm25_build import build_index
from retrieval_bench.text.token_cache import TokenizedCorpus


def _same_index(a: SparseBM25, b: SparseBM25) -> None:
    """Every array of the two indexes equal, bit for bit (not within a tolerance)."""
    for name in ("data", "indices", "indptr"):
        left, right = getattr(a.matrix, name), getattr(b.matrix, name)
        assert left.dtype == right.dtype, name
        np.testing.assert_array_equal(left, right, err_msg=name)
    assert (a.table is None) == (b.table is None)
    if a.table is not None:
        np.testing.assert_array_equal(a.table, b.table)  # NaN after the values, in both
    assert a.matrix.shape == b.matrix.shape
    np.testing.assert_array_equal(a.idf, b.idf)
    assert a.average_idf == b.average_idf
    assert list(a.vocab.items()) == list(b.vocab.items())


def _corpora() -> list[list[list[str]]]:
    """A Zipf corpus whose common terms get the epsilon floor, one with empty passages (a whole
    chunk of them at chunk size 1 and 2) and one whose mean IDF is negative."""
    zipf = random_corpus(11, n_docs=97, vocab=50)
    empties = [[], [], ["a"], ["a", "b", "a"], [], ["c", "a"], [], []]
    negative = [["a", "b", "u1"], ["a", "b", "u2"], ["a", "b"], ["a", "c"]]
    return [zipf, empties, negative]


@pytest.mark.parametrize("which", range(3))
@pytest.mark.parametrize("params", [(1.5, 0.75, 0.25), (1.2, 0.3, 0.5)])
def test_chunked_build_equals_one_shot(which: int, params: tuple[float, float, float]) -> None:
    corpus = _corpora()[which]
    k1, b, epsilon = params
    config = BM25Config(k1=k1, b=b, epsilon=epsilon)
    tokens = TokenizedCorpus.from_tokens(corpus)
    n = len(corpus)

    def built(chunk: int) -> SparseBM25:
        return SparseBM25.from_term_ids(tokens.vocab, tokens.ids, tokens.lengths, config, chunk)

    one_shot = built(n)
    reference = BM25Okapi(corpus, k1=k1, b=b, epsilon=epsilon)
    # The vocabulary in rank_bm25's order (first occurrence), which fixes the IDF mean's sum.
    assert list(one_shot.vocab) == list(reference.idf)
    assert one_shot.average_idf == reference.average_idf
    if which != 1:  # the floor is exercised: some IDF is epsilon x the mean
        floor = epsilon * reference.average_idf
        assert any(v == floor for v in reference.idf.values())
    for chunk in sorted({1, 2, 3, 7, n - 1, n + 5} - {0}):
        _same_index(built(chunk), one_shot)


def test_each_row_is_rank_bm25s_weight_per_term() -> None:
    """Row t of the matrix, as a dense vector, is rank_bm25's scores for the query [t]: its
    `idf * weight` per passage added to 0.0, i.e. the same doubles."""
    corpus = random_corpus(4, n_docs=60, vocab=30)
    tokens = TokenizedCorpus.from_tokens(corpus)
    index = build_index(tokens.ids, tokens.lengths, len(tokens.vocab), BM25Config(), 4)
    reference = BM25Okapi(corpus)
    assert index.table is not None and index.matrix.data.dtype == np.uint16
    dense = index.weights().toarray()
    for row, term in enumerate(tokens.vocab):
        np.testing.assert_array_equal(dense[row], reference.get_scores([term]))
    assert index.matrix.has_sorted_indices
    for row in range(index.matrix.shape[0]):
        start, end = index.matrix.indptr[row], index.matrix.indptr[row + 1]
        assert (np.diff(index.matrix.indices[start:end]) > 0).all(), "a row's passages ascend"


def test_rankings_of_a_chunked_index_equal_the_one_shot(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the arm returns (top-k with filters and ties) does not depend on the chunk size."""
    import retrieval_bench.retrievers.bm25_build as bm25_build

    corpus = random_corpus(8, n_docs=150, vocab=40)
    ids = [f"p{i:03d}" for i in range(len(corpus))]
    rng = random.Random(3)
    queries = [" ".join(f"w{rng.randint(0, 45)}" for _ in range(4)) for _ in range(30)]
    masks = [None if i % 3 else np.arange(len(corpus)) % 2 == 0 for i in range(len(queries))]
    results = {}
    for chunk in (len(corpus), 3):
        monkeypatch.setattr(bm25_build, "CHUNK_PASSAGES", chunk)
        tokens = TokenizedCorpus.from_tokens(corpus)
        retriever = BM25Retriever(ids, tokens, str.split, BM25Config())
        ranked = retriever.search(queries, 10, masks)
        results[chunk] = [(r.indices.tolist(), r.scores.tolist(), r.empty_reason) for r in ranked]
    assert results[3] == results[len(corpus)]


def test_refuses_an_empty_corpus_and_a_chunk_of_zero() -> None:
    with pytest.raises(ValueError, match="at least one passage"):
        build_index(np.zeros(0, np.int32), np.zeros(0, np.int64), 0, BM25Config())
    with pytest.raises(ValueError, match="chunk_passages"):
        build_index(np.zeros(1, np.int32), np.ones(1, np.int64), 1, BM25Config(), 0)


def test_the_code_table_holds_each_saturated_tf_once_most_used_first() -> None:
    """The table: rank_bm25's distinct per-posting weights over IDF (the saturated tfs), each
    once, ordered by how many postings use it, then NaN up to one entry per uint16 code."""
    import retrieval_bench.retrievers.bm25_build as bm25_build

    corpus = random_corpus(2, n_docs=200, vocab=40)
    tokens = TokenizedCorpus.from_tokens(corpus)
    index = build_index(tokens.ids, tokens.lengths, len(tokens.vocab), BM25Config(), 7)
    table = index.table
    assert table is not None and len(table) == bm25_build.CODES
    reference = BM25Okapi(corpus)
    k1, b, avgdl = 1.5, 0.75, reference.avgdl
    saturated = [
        tf * (k1 + 1) / (tf + k1 * (1 - b + b * reference.doc_len[j] / avgdl))
        for j, freqs in enumerate(reference.doc_freqs)
        for tf in freqs.values()
    ]
    distinct = set(saturated)
    n = len(distinct)
    assert set(table[:n].tolist()) == distinct
    assert np.isnan(table[n:]).all()
    uses = np.bincount(index.matrix.data, minlength=n)
    assert len(uses) == n and (np.diff(uses) <= 0).all(), "the most used codes come first"
    assert sorted(uses.tolist()) == sorted(saturated.count(v) for v in distinct)


def test_more_distinct_weights_than_codes_keep_the_float64_weights() -> None:
    """Over `max_codes` distinct saturated tfs, the postings hold the float64 weights: the very
    values the coded index stands for; at exactly `max_codes`, still codes."""
    corpus = random_corpus(6, n_docs=120, vocab=30)
    tokens = TokenizedCorpus.from_tokens(corpus)
    args = (tokens.ids, tokens.lengths, len(tokens.vocab), BM25Config(), 11)
    coded = build_index(*args)
    assert coded.table is not None
    n = int(np.count_nonzero(~np.isnan(coded.table)))
    assert build_index(*args, max_codes=n).table is not None
    plain = build_index(*args, max_codes=n - 1)
    assert plain.table is None and plain.matrix.data.dtype == np.float64
    for name in ("indices", "indptr"):
        np.testing.assert_array_equal(getattr(plain.matrix, name), getattr(coded.matrix, name))
    np.testing.assert_array_equal(plain.matrix.data, coded.weights().data)
    assert plain.weights() is plain.matrix
    with pytest.raises(ValueError, match="max_codes"):
        build_index(*args, max_codes=65_537)


def test_long_passages_count_their_pairs_by_sorting(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keys past DENSE_KEYS (long passages) are counted with a sort, not bincount: the same
    index."""
    import retrieval_bench.retrievers.bm25_build as bm25_build

    corpus = random_corpus(9, n_docs=90, vocab=35)
    tokens = TokenizedCorpus.from_tokens(corpus)
    args = (tokens.ids, tokens.lengths, len(tokens.vocab), BM25Config(), 8)
    dense = build_index(*args)
    monkeypatch.setattr(bm25_build, "DENSE_KEYS", 0)
    sorted_ = build_index(*args)
    assert dense.table is not None and sorted_.table is not None
    np.testing.assert_array_equal(dense.table, sorted_.table)
    np.testing.assert_array_equal(dense.matrix.data, sorted_.matrix.data)
