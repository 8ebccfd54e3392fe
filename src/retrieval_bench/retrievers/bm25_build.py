"""BM25's term x passage index built chunk by chunk, so its peak is the index plus one chunk.

Why: the one-shot COO -> CSR conversion holds, for every token of the corpus at once, a float64
one, an int32 row and an int32 column, then the CSR copy and the weight temporaries: 3.4 GB at
1M passages (57M tokens), ~34 GB at 10M, past a 24 GB machine. Here the corpus is read in
chunks of `chunk_passages` passages, twice:

1. count: each chunk's distinct (term, passage) pairs per term, summed into the document
   frequency of every term. The IDFs, the epsilon floor and the final row starts follow from
   those counts alone, before any weight exists.
2. fill: each chunk's (term, passage, tf) postings again, their weights computed with
   rank_bm25's expression, each written into its term's row right after the postings of the
   chunks before it. Chunks come in passage order, so every row's passages stay ascending: a
   row by row merge that needs no sort and no copy of the index.

The peak is the final index (float64 weight and int32 passage per posting, int64 row starts)
plus one chunk's postings and temporaries; a chunk is re-derived in the second pass instead of
kept (its CSR costs as much as a tenth of the index per 1M passages, and re-deriving it is a
counting sort). Every value is the one-shot build's, bit for bit: the same `math.log` per
distinct document frequency, the same sequential mean for the epsilon floor (vocabulary order),
the same float64 operations in the same order per weight (tests/test_bm25_build.py compares
the two on corpora cut into chunks of 1 to n passages).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import sparse

from retrieval_bench.config.bm25 import BM25Config
from retrieval_bench.progress import progress

CHUNK_PASSAGES = 100_000
"""Passages per chunk: ~5.7M tokens of Chinese text, whose postings and temporaries take 0.3 GiB
above the index (0.67 GiB at 250,000 a chunk), against ~6 GiB for the whole index of 10M
passages; the build takes as long either way (6.6 s against 6.8 s at 1M passages)."""


@dataclass(frozen=True)
class BM25Index:
    """The built index: `matrix` (terms x passages CSR of idf x saturated tf, each row's
    passages ascending), each term's IDF after the epsilon floor, and rank_bm25's
    `average_idf`."""

    matrix: sparse.csr_matrix
    idf: np.ndarray
    average_idf: float


def _chunk_tf(term_ids: np.ndarray, lengths: np.ndarray, n_terms: int) -> sparse.csr_matrix:
    """One chunk's terms x (its own) passages CSR of term frequencies (int32), each row's
    passages ascending: scipy's COO -> CSR is a counting sort by term that keeps the token
    order (passage order) within a term, and duplicates of a (term, passage) pair are adjacent,
    so summing them leaves the rows sorted."""
    doc_ids = np.repeat(np.arange(len(lengths), dtype=np.int32), lengths)
    ones = np.ones(len(term_ids), dtype=np.int32)
    tf = sparse.csr_matrix((ones, (term_ids, doc_ids)), shape=(n_terms, len(lengths)))
    tf.sum_duplicates()
    tf.sort_indices()
    return tf


def _idf(df: np.ndarray, n_docs: int, epsilon: float) -> tuple[np.ndarray, float]:
    """Each term's IDF as rank_bm25 computes it: `math.log` (not np.log, whose SIMD kernels may
    round differently) on each distinct df; the mean summed one by one in vocabulary order (as
    rank_bm25's loop, which cumsum reproduces); a negative IDF floored at epsilon x mean."""
    distinct, inverse = np.unique(df, return_inverse=True)
    logs = [math.log(n_docs - f + 0.5) - math.log(f + 0.5) for f in distinct.tolist()]
    idf = np.asarray(logs, dtype=np.float64)[inverse]
    average_idf = float(np.cumsum(idf)[-1]) / len(idf) if len(idf) else 0.0
    idf[idf < 0] = epsilon * average_idf
    return idf, average_idf


def build_index(
    term_ids: np.ndarray,
    lengths: np.ndarray,
    n_terms: int,
    config: BM25Config,
    chunk_passages: int | None = None,
) -> BM25Index:
    """The BM25Okapi index of a corpus given as term ids (`lengths[j]` ids per passage, back
    to back; terms numbered 0..n_terms-1 in rank_bm25's vocabulary order), built in chunks of
    `chunk_passages` passages (None: CHUNK_PASSAGES, read when called; module docstring)."""
    if chunk_passages is None:
        chunk_passages = CHUNK_PASSAGES
    n_docs = len(lengths)
    if n_docs == 0:
        raise ValueError("BM25 needs at least one passage")
    if chunk_passages < 1:
        raise ValueError(f"chunk_passages must be >= 1, got {chunk_passages}")
    lengths = np.asarray(lengths, dtype=np.int64)
    ends = np.cumsum(lengths)
    bounds = [(s, min(s + chunk_passages, n_docs)) for s in range(0, n_docs, chunk_passages)]

    def chunk(start: int, stop: int) -> sparse.csr_matrix:
        first = int(ends[start - 1]) if start else 0
        return _chunk_tf(term_ids[first : int(ends[stop - 1])], lengths[start:stop], n_terms)

    # Pass 1: document frequencies. With one chunk, its CSR is kept for pass 2.
    df = np.zeros(n_terms, dtype=np.int64)
    kept: sparse.csr_matrix | None = None
    with progress("indexing passages (bm25): counting terms", n_docs, "passage") as bar:
        for start, stop in bounds:
            tf = chunk(start, stop)
            df += np.diff(tf.indptr)
            kept = tf if len(bounds) == 1 else None
            del tf
            bar.update(stop - start)
    idf, average_idf = _idf(df, n_docs, config.epsilon)
    indptr = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(df, out=indptr[1:])
    nnz = int(indptr[-1])
    indices = np.empty(nnz, dtype=np.int32)
    data = np.empty(nnz, dtype=np.float64)
    cursor = indptr[:-1].copy()  # where each row's next posting goes
    doc_len = lengths.astype(np.float64)
    avgdl = int(lengths.sum()) / n_docs
    k1, b = config.k1, config.b
    # Pass 2: each chunk's postings, weighted, appended to their rows.
    with progress("indexing passages (bm25): weighting postings", n_docs, "passage") as bar:
        for start, stop in bounds:
            tf = kept if kept is not None else chunk(start, stop)
            kept = None
            counts = np.diff(tf.indptr)
            rows = np.repeat(np.arange(n_terms, dtype=np.int64), counts)
            # Posting i of row t goes to cursor[t] + (i - the row's first posting in the chunk).
            dest = np.repeat(cursor - tf.indptr[:-1], counts)
            dest += np.arange(len(rows), dtype=np.int64)
            docs = tf.indices.astype(np.int32) + np.int32(start)
            freq = tf.data.astype(np.float64)
            # rank_bm25's expression, term for term, so every weight is the same double; then
            # idf * weight, the very product rank_bm25 forms per query term.
            weight = freq * (k1 + 1) / (freq + k1 * (1 - b + b * doc_len[docs] / avgdl))
            indices[dest] = docs
            data[dest] = idf[rows] * weight
            cursor += counts
            del tf, counts, rows, dest, docs, freq, weight
            bar.update(stop - start)
    matrix = sparse.csr_matrix((data, indices, indptr), shape=(n_terms, n_docs), copy=False)
    matrix.has_sorted_indices = True  # every row's passages ascending (module docstring)
    return BM25Index(matrix, idf, average_idf)
