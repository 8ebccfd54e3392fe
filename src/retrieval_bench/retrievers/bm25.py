"""BM25 with rank_bm25's BM25Okapi semantics, scored as a sparse matrix product.

rank_bm25 walks every document in Python for every query term; here the per-(term, passage)
weights are precomputed once, so a query costs one sparse row gather. Scores equal
rank_bm25's (tests compare them to 1e-9), including the epsilon floor: a term whose IDF is
negative gets `epsilon * mean(IDF over the vocabulary)`. `impl="rank_bm25"` runs the reference
itself.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import sparse

from retrieval_bench.retrievers.base import Ranked, TieBreak

BM25_IMPLS = ("sparse", "rank_bm25")


@dataclass(frozen=True)
class BM25Config:
    k1: float = 1.5
    b: float = 0.75
    epsilon: float = 0.25
    impl: str = "sparse"


class SparseBM25:
    """Exact BM25Okapi over a term x passage CSR matrix of saturated, length-normalised tf."""

    def __init__(self, corpus_tokens: Sequence[Sequence[str]], config: BM25Config) -> None:
        self.config = config
        vocab: dict[str, int] = {}
        rows: list[int] = []
        cols: list[int] = []
        tfs: list[int] = []
        doc_len = np.zeros(len(corpus_tokens), dtype=np.float64)
        for doc, tokens in enumerate(corpus_tokens):
            doc_len[doc] = len(tokens)
            for term, tf in Counter(tokens).items():
                rows.append(vocab.setdefault(term, len(vocab)))
                cols.append(doc)
                tfs.append(tf)
        self.vocab = vocab
        n_docs = len(corpus_tokens)
        avgdl = float(doc_len.sum()) / n_docs
        tf = np.asarray(tfs, dtype=np.float64)
        col = np.asarray(cols, dtype=np.int64)
        k1, b = config.k1, config.b
        weight = tf * (k1 + 1) / (tf + k1 * (1 - b + b * doc_len[col] / avgdl))
        self.matrix = sparse.csr_matrix(
            (weight, (np.asarray(rows, dtype=np.int64), col)), shape=(len(vocab), n_docs)
        )
        df = np.diff(self.matrix.indptr).astype(np.float64)
        idf = np.array([math.log(n_docs - f + 0.5) - math.log(f + 0.5) for f in df])
        # rank_bm25 sums IDFs in insertion order; math.fsum keeps the mean exact either way.
        average_idf = math.fsum(idf) / len(idf) if len(idf) else 0.0
        idf[idf < 0] = config.epsilon * average_idf
        self.idf = idf

    def scores(self, query_tokens: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(scores over all passages, indices of passages sharing at least one query term)."""
        counts = Counter(t for t in query_tokens if t in self.vocab)
        n_docs = self.matrix.shape[1]
        if not counts:
            return np.zeros(n_docs), np.empty(0, dtype=np.int64)
        term_ids = np.fromiter((self.vocab[t] for t in counts), dtype=np.int64)
        weights = self.idf[term_ids] * np.fromiter(counts.values(), dtype=np.float64)
        rows = self.matrix[term_ids]
        scores = np.asarray(rows.T @ weights).ravel()
        matched = np.unique(rows.indices).astype(np.int64)
        return scores, matched


class ReferenceBM25:
    """rank_bm25.BM25Okapi itself, for checking and for users who want the original."""

    def __init__(self, corpus_tokens: Sequence[Sequence[str]], config: BM25Config) -> None:
        from rank_bm25 import BM25Okapi

        self.model = BM25Okapi(
            [list(t) for t in corpus_tokens], k1=config.k1, b=config.b, epsilon=config.epsilon
        )
        self.vocab = self.model.idf

    def scores(self, query_tokens: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        scores = np.asarray(self.model.get_scores(list(query_tokens)), dtype=np.float64)
        terms = {t for t in query_tokens if t in self.vocab}
        matched = [i for i, freqs in enumerate(self.model.doc_freqs) if terms & freqs.keys()]
        return scores, np.asarray(matched, dtype=np.int64)


class BM25Retriever:
    """The BM25 arm: passages that share no term with the query are not candidates."""

    name = "bm25"

    def __init__(
        self,
        passage_ids: Sequence[str],
        corpus_tokens: Sequence[Sequence[str]],
        tokenize: Callable[[str], list[str]],
        config: BM25Config,
    ) -> None:
        impl = SparseBM25 if config.impl == "sparse" else ReferenceBM25
        self.scorer = impl(corpus_tokens, config)
        self.tokenize = tokenize
        self.tie_break = TieBreak(passage_ids)

    def search(
        self, queries: Sequence[str], k: int, allowed: Sequence[np.ndarray | None]
    ) -> list[Ranked]:
        results = []
        for query, mask in zip(queries, allowed, strict=True):
            scores, matched = self.scorer.scores(self.tokenize(query))
            if mask is not None:
                matched = matched[mask[matched]]
            indices, top = self.tie_break.top(matched, scores[matched], k)
            results.append(Ranked(indices=indices, scores=top, requested=k))
        return results
