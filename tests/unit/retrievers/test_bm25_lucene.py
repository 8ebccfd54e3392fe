"""arms.bm25.variant=lucene: Lucene 9's BM25Similarity, against a line-by-line transcription of it.

The transcription below follows Lucene 9.9.1's Java (the version inside Anserini 1.7.1):
`SmallFloat.intToByte4`/`byte4ToInt` on Python ints, `BM25Similarity.idf`, `avgFieldLength`,
`scorer`'s 256-entry cache and `BM25Scorer.score` with every float operation rounded to
float32 one at a time, and the disjunction's double sum cast to float. The real Lucene is
compared in tests/unit/retrievers/test_lucene_arm.py (slow: it runs the JVM).
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from conftest import compiled_or_numpy
from support.fused_top import check_fused_top
from support.random_cases import random_corpus

from retrieval_bench.config.bm25 import BM25Config
from retrieval_bench.retrievers import bm25_build, bm25_kernel
from retrieval_bench.retrievers.bm25 import BM25Retriever, SparseBM25
from retrieval_bench.tiebreak import TieBreak

f32 = np.float32


@pytest.fixture(autouse=True, params=["compiled", "numpy"])
def scoring_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    return compiled_or_numpy(request, monkeypatch, bm25_kernel, "the compiled BM25 kernel")


def _long_to_int4(i: int) -> int:
    num_bits = i.bit_length()  # 64 - Long.numberOfLeadingZeros(i)
    if num_bits < 4:
        return i
    shift = num_bits - 4
    encoded = (i >> shift) & 0x07
    return encoded | ((shift + 1) << 3)


def _int4_to_long(i: int) -> int:
    bits = i & 0x07
    shift = (i >> 3) - 1
    return bits if shift == -1 else (bits | 0x08) << shift


FREE = 255 - _long_to_int4(2**31 - 1)


def int_to_byte4(i: int) -> int:
    return i if i < FREE else FREE + _long_to_int4(i - FREE)


def byte4_to_int(b: int) -> int:
    return b if b < FREE else FREE + _int4_to_long(b - FREE)


def lucene_reference(
    corpus: list[list[str]], query: list[str], k1: float, b: float
) -> dict[int, np.float32]:
    """Each matched passage's float32 score, computed as Lucene computes it."""
    doc_count = sum(1 for doc in corpus if doc)
    avgdl = f32(sum(len(doc) for doc in corpus) / doc_count)
    k1f, bf = f32(k1), f32(b)
    length_table = [f32(byte4_to_int(i)) for i in range(256)]
    with np.errstate(divide="ignore"):  # b = 1: the unused norm of an empty passage
        cache = [f32(1) / (k1f * ((f32(1) - bf) + bf * lt / avgdl)) for lt in length_table]
    df = Counter(t for doc in corpus for t in set(doc))
    clauses = Counter(query)  # Anserini's bag of words: one clause per term, boost = count
    tfs = [Counter(doc) for doc in corpus]
    out = {}
    for d, doc in enumerate(corpus):
        total, hit = 0.0, False
        for term, count in clauses.items():
            if tfs[d][term] == 0:
                continue
            hit = True
            n = df[term]
            idf = f32(math.log(1 + (doc_count - n + 0.5) / (n + 0.5)))
            weight = f32(count) * idf
            norm_inverse = cache[int_to_byte4(len(doc))]
            total += float(weight - weight / (f32(1) + f32(tfs[d][term]) * norm_inverse))
        if hit:
            out[d] = f32(total)
    return out


def test_smallfloat_norms_equal_lucenes_encoding() -> None:
    lengths = [*range(0, 70_000), *np.random.default_rng(0).integers(0, 2**31 - 1, 5000).tolist()]
    lengths += [2**k + j for k in range(4, 31) for j in (-1, 0, 1)]
    got = bm25_build.int_to_byte4(np.asarray(lengths))
    assert got.tolist() == [int_to_byte4(n) for n in lengths]
    assert bm25_build.byte4_to_int(np.arange(256)).tolist() == [byte4_to_int(i) for i in range(256)]
    assert bm25_build.LENGTH_TABLE[255] == 2013265944.0  # SmallFloat's largest length


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("params", [(0.9, 0.4), (1.2, 0.75), (1.5, 0.0), (0.3, 1.0)])
def test_scores_equal_lucene_bit_for_bit(seed: int, params: tuple[float, float]) -> None:
    """Every matched passage's score is Lucene's float32 value exactly, with queries that
    repeat terms (a boost of their count), terms the corpus lacks and empty passages (not
    counted in docCount, as Lucene counts only documents holding a term)."""
    corpus = random_corpus(seed, n_docs=300)
    corpus[5] = []
    k1, b = params
    sparse = SparseBM25(corpus, BM25Config(k1=k1, b=b, variant="lucene"))
    postings = np.diff(sparse.matrix.indptr)
    # Both of the kernel's ways: rows longer than the codes in use get their scores per code
    # once per query, shorter ones divide per posting (b = 0: few codes, every row is long).
    assert (postings > sparse.n_codes).any() and (b == 0 or (postings <= sparse.n_codes).any())
    rng = np.random.default_rng(seed + 10)
    for _ in range(40):
        query = [f"w{i}" for i in rng.integers(0, 70, size=rng.integers(1, 9))]
        expected = lucene_reference(corpus, query, k1, b)
        scores, matched = sparse.scores(query)
        assert matched.tolist() == sorted(expected)
        assert scores[matched].tolist() == [float(expected[d]) for d in matched.tolist()]
        assert (scores[np.setdiff1d(np.arange(len(corpus)), matched)] == 0).all()


def test_a_long_query_with_repeats_is_one_clause_per_term_in_first_occurrence_order(
    scoring_path: str,
) -> None:
    """Hundreds of query tokens, most repeated (the kernel finds repeats through a hash table
    it grows with the query, probing past collisions): each term is one clause boosted by its
    count, the scores Lucene's to the bit, fused top and all."""
    corpus = random_corpus(4, n_docs=300, vocab=200)
    sparse = SparseBM25(corpus, BM25Config(k1=0.9, b=0.4, variant="lucene"))
    rng = np.random.default_rng(4)
    tie = TieBreak([f"p{i:04d}" for i in range(len(corpus))])
    for size in (17, 120, 700):
        query = [f"w{i}" for i in rng.integers(0, 230, size=size)]  # w200...: not in the corpus
        expected = lucene_reference(corpus, query, 0.9, 0.4)
        scores, matched = sparse.scores(query)
        assert matched.tolist() == sorted(expected)
        assert scores[matched].tolist() == [float(expected[d]) for d in matched.tolist()]
        check_fused_top(sparse, query, 10, tie, None, scoring_path)


@pytest.mark.parametrize("max_codes", [0, None])
def test_the_fused_top_is_exact_on_float32_ties(
    max_codes: int | None, scoring_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Float32 scores tie far more often than rank_bm25's doubles: the fused top (masks, any
    k, with and without a code table) equals scores + TieBreak.top, ties by id descending."""
    if max_codes is not None:
        monkeypatch.setattr(bm25_build, "MAX_CODES", max_codes)
    rng = np.random.default_rng(3)
    weights = 1.0 / np.arange(1, 121) ** 1.1
    words = rng.choice(120, size=(5000, 10), p=weights / weights.sum())
    corpus = [[f"w{i}" for i in row[: rng.integers(1, 11)]] for row in words]
    sparse = SparseBM25(corpus, BM25Config(k1=0.9, b=0.4, variant="lucene"))
    assert (sparse.table is None) == (max_codes == 0)
    tie = TieBreak([f"p{i:05d}" for i in rng.permutation(len(corpus))])
    for _ in range(30):
        query = [f"w{i}" for i in rng.integers(0, 120, size=rng.integers(1, 6))]
        mask = rng.random(len(corpus)) < 0.4 if rng.random() < 0.4 else None
        for k in (1, 10, 100):
            check_fused_top(sparse, query, k, tie, mask, scoring_path)
    assert not sparse._scratch.any()


def test_a_denominator_near_one_marks_matches_instead_of_reading_scores() -> None:
    """k1 so large that `1 + tf * cache` rounds to 1: Lucene's term score is then 0.0 and the
    passage is still a hit, as Lucene returns it."""
    corpus = [["a", "b"], ["a"], ["c"]]
    sparse = SparseBM25(corpus, BM25Config(k1=1e9, b=0.5, variant="lucene"))
    assert not sparse.sure_positive
    scores, matched = sparse.scores(["a"])
    assert matched.tolist() == [0, 1] and scores.tolist() == [0.0, 0.0, 0.0]


def test_the_arm_ranks_float32_ties_by_id_descending() -> None:
    corpus = [["x", "y"], ["y", "x"], ["x", "y"], ["z"]]
    ids = ["b", "c", "a", "d"]
    retriever = BM25Retriever(ids, corpus, str.split, BM25Config(variant="lucene"))
    (ranked,) = retriever.search(["x"], 3, [None])
    assert [ids[i] for i in ranked.indices] == ["c", "b", "a"]
    assert len(set(ranked.scores.tolist())) == 1
    assert retriever.index_info()["variant"] == "lucene"


def test_an_unknown_variant_is_refused_naming_the_key() -> None:
    from retrieval_bench.errors import ConfigError

    with pytest.raises(ConfigError, match=r"bm25\.variant.*'okapi' is not one of"):
        SparseBM25([["a"]], BM25Config(variant="okapi"))
