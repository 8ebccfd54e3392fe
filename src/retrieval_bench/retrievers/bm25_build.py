"""BM25's term x passage index built chunk by chunk, so its peak is the index plus one chunk.

Why: the one-shot COO -> CSR conversion holds, for every token of the corpus at once, a float64
one, an int32 row and an int32 column, then the CSR copy and the weight temporaries: 3.4 GB at
1M passages (57M tokens), ~34 GB at 10M, past a 24 GB machine. Here the corpus is read in
chunks of `chunk_passages` passages, twice:

1. count: each chunk's distinct (term, passage) pairs per term, summed into the document
   frequency of every term, and its postings per (tf, passage length) pair. The IDFs, the
   epsilon floor, the final row starts and the code table (below) follow from those counts
   alone, before any weight exists.
2. fill: each chunk's (term, passage, tf) postings again, each posting's code (or, without a
   table, its weight computed with rank_bm25's expression) written into its term's row right
   after the postings of the chunks before it. Chunks come in passage order, so every row's
   passages stay ascending: a row by row merge that needs no sort and no copy of the index.

The peak is the final index (a uint16 code and an int32 passage per posting, int64 row starts)
plus one chunk's postings and temporaries; a chunk is re-derived in the second pass instead of
kept (its CSR costs as much as a tenth of the index per 1M passages, and re-deriving it is a
counting sort). Every value is the one-shot build's, bit for bit: the same `math.log` per
distinct document frequency, the same sequential mean for the epsilon floor (vocabulary order),
the same float64 operations in the same order per weight (tests/test_bm25_build.py compares
the two on corpora cut into chunks of 1 to n passages).

What a posting stores: a weight is `idf[term] * g`, where rank_bm25's saturated tf
`g = tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))` depends on the (tf, passage length)
pair alone, and a corpus has few such pairs (1,228 at 1M passages of the benchmark's corpus).
So pass 1 also counts the postings of each distinct pair, the distinct values of g form a
float64 table (the most used first, so the hot ones share cache lines), and pass 2 stores each
posting's uint16 code into it. A query forms `idf[term] * table[code]`, the very product a
stored weight was, so the scores stay bit-identical, from 6 bytes a posting instead of 12: at 1M
passages a query's common terms post in most passages, and streaming their postings is what a
query costs. Where a corpus has more distinct values than a uint16 names (`max_codes`), the
postings hold the float64 weights themselves, as before.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import sparse

from retrieval_bench.config.bm25 import BM25Config
from retrieval_bench.progress import progress

CODES = 65_536
"""Entries of the code table: one per uint16 code, so no code can index past it (the kernel
checks the length, not every posting); the entries after the distinct values are NaN."""

MAX_CODES = CODES
"""Distinct saturated tfs at most for the coded postings (read when build_index is called, so
tests can lower it); more, and the postings hold float64 weights."""

DENSE_KEYS = 1 << 22
"""(tf, length) keys below this are counted with bincount and coded through an array indexed by
key (32 MiB at most), at or above it with a sort and a binary search (np.unique and
np.searchsorted, each ~10x slower): passages of thousands of tokens."""

CHUNK_PASSAGES = 100_000
"""Passages per chunk: ~5.7M tokens of Chinese text, whose postings and temporaries take 0.3 GiB
above the index (0.67 GiB at 250,000 a chunk), against ~6 GiB for the whole index of 10M
passages; the build takes as long either way (6.6 s against 6.8 s at 1M passages)."""


@dataclass(frozen=True)
class BM25Index:
    """The built index: `matrix` (terms x passages CSR, each row's passages ascending) whose
    data are uint16 codes into `table` (float64, CODES entries: the distinct saturated tfs, most
    used first, then NaN), or, where `table` is None, the float64 weights idf x saturated tf
    themselves; each term's IDF after the epsilon floor, and rank_bm25's `average_idf`."""

    matrix: sparse.csr_matrix
    table: np.ndarray | None
    idf: np.ndarray
    average_idf: float

    def weights(self) -> sparse.csr_matrix:
        """The float64 weights the postings stand for: `idf[row] * table[code]`, the product a
        query forms (the matrix itself where the postings hold weights)."""
        return weight_matrix(self.matrix, self.table, self.idf)


def weight_matrix(
    matrix: sparse.csr_matrix, table: np.ndarray | None, idf: np.ndarray
) -> sparse.csr_matrix:
    """`matrix` (BM25Index's) with each code replaced by its weight `idf[row] * table[code]`."""
    if table is None:
        return matrix
    rows = np.repeat(np.arange(matrix.shape[0]), np.diff(matrix.indptr))
    data = idf[rows] * table[matrix.data]
    out = sparse.csr_matrix((data, matrix.indices, matrix.indptr), shape=matrix.shape)
    out.has_sorted_indices = matrix.has_sorted_indices
    return out


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


def _key_counts(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct keys, ascending; how many times each occurs)."""
    if len(keys) == 0 or int(keys.max()) < DENSE_KEYS:
        counts = np.bincount(keys)
        distinct = np.flatnonzero(counts)
        return distinct, counts[distinct]
    return np.unique(keys, return_counts=True)


def _code_table(
    keys: np.ndarray, uses: np.ndarray, span: int, avgdl: float, config: BM25Config
) -> tuple[np.ndarray, np.ndarray]:
    """(each distinct (tf, length) key's code, the table of distinct saturated tfs) from the
    keys `tf * span + length` and their posting counts: g computed per pair with rank_bm25's
    expression (the same doubles as per posting), equal values merged, the most used first."""
    k1, b = config.k1, config.b
    freq = (keys // span).astype(np.float64)
    doc_len = (keys % span).astype(np.float64)
    g = freq * (k1 + 1) / (freq + k1 * (1 - b + b * doc_len / avgdl))
    values, inverse = np.unique(g, return_inverse=True)
    value_uses = np.zeros(len(values), dtype=np.int64)
    np.add.at(value_uses, inverse, uses)
    order = np.lexsort((values, -value_uses))  # most used first; equal uses by value
    code = np.empty(len(values), dtype=np.int64)
    code[order] = np.arange(len(values))
    return code[inverse], values[order]


def build_index(
    term_ids: np.ndarray,
    lengths: np.ndarray,
    n_terms: int,
    config: BM25Config,
    chunk_passages: int | None = None,
    max_codes: int | None = None,
) -> BM25Index:
    """The BM25Okapi index of a corpus given as term ids (`lengths[j]` ids per passage, back
    to back; terms numbered 0..n_terms-1 in rank_bm25's vocabulary order), built in chunks of
    `chunk_passages` passages (None: CHUNK_PASSAGES), its postings coded where it has at most
    `max_codes` distinct saturated tfs (None: MAX_CODES, at most CODES; both read when called;
    module docstring)."""
    if chunk_passages is None:
        chunk_passages = CHUNK_PASSAGES
    if max_codes is None:
        max_codes = MAX_CODES
    if not 0 <= max_codes <= CODES:
        raise ValueError(f"max_codes must be in 0..{CODES}, got {max_codes}")
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

    # A posting's (tf, passage length) as one key, tf * span + length (tf <= length < span).
    span = int(lengths.max()) + 1

    def pair_keys(tf: sparse.csr_matrix, start: int) -> np.ndarray:
        keys = tf.data.astype(np.int64)
        keys *= span
        keys += lengths[start:][tf.indices]
        return keys

    # Pass 1: document frequencies and the postings of each (tf, length) pair. With one chunk,
    # its CSR is kept for pass 2.
    df = np.zeros(n_terms, dtype=np.int64)
    seen: list[tuple[np.ndarray, np.ndarray]] = []
    kept: sparse.csr_matrix | None = None
    with progress("indexing passages (bm25): counting terms", n_docs, "passage") as bar:
        for start, stop in bounds:
            tf = chunk(start, stop)
            df += np.diff(tf.indptr)
            seen.append(_key_counts(pair_keys(tf, start)))
            kept = tf if len(bounds) == 1 else None
            del tf
            bar.update(stop - start)
    idf, average_idf = _idf(df, n_docs, config.epsilon)
    avgdl = int(lengths.sum()) / n_docs
    keys, inverse = np.unique(np.concatenate([k for k, _ in seen]), return_inverse=True)
    uses = np.zeros(len(keys), dtype=np.int64)
    np.add.at(uses, inverse, np.concatenate([c for _, c in seen]))
    del seen, inverse
    key_code, values = _code_table(keys, uses, span, avgdl, config)
    table: np.ndarray | None = None
    if len(values) <= max_codes:
        table = np.full(CODES, np.nan)
        table[: len(values)] = values
        key_code = key_code.astype(np.uint16)
    code_of: np.ndarray | None = None  # each key's code, indexed by key
    if table is not None and len(keys) and int(keys[-1]) < DENSE_KEYS:
        code_of = np.zeros(int(keys[-1]) + 1, dtype=np.uint16)
        code_of[keys] = key_code
    indptr = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(df, out=indptr[1:])
    nnz = int(indptr[-1])
    indices = np.empty(nnz, dtype=np.int32)
    data = np.empty(nnz, dtype=np.float64 if table is None else np.uint16)
    cursor = indptr[:-1].copy()  # where each row's next posting goes
    doc_len = lengths.astype(np.float64)
    k1, b = config.k1, config.b
    # Pass 2: each chunk's postings, coded (or weighted), appended to their rows.
    with progress("indexing passages (bm25): weighting postings", n_docs, "passage") as bar:
        for start, stop in bounds:
            tf = kept if kept is not None else chunk(start, stop)
            kept = None
            counts = np.diff(tf.indptr)
            # Posting i of row t goes to cursor[t] + (i - the row's first posting in the chunk).
            dest = np.repeat(cursor - tf.indptr[:-1], counts)
            dest += np.arange(len(dest), dtype=np.int64)
            docs = tf.indices.astype(np.int32) + np.int32(start)
            indices[dest] = docs
            if code_of is not None:  # the code of the posting's (tf, length) pair
                data[dest] = code_of[pair_keys(tf, start)]
            elif table is not None:
                data[dest] = key_code[np.searchsorted(keys, pair_keys(tf, start))]
            else:
                freq = tf.data.astype(np.float64)
                # rank_bm25's expression, term for term, so every weight is the same double;
                # then idf * weight, the very product rank_bm25 forms per query term.
                weight = freq * (k1 + 1) / (freq + k1 * (1 - b + b * doc_len[docs] / avgdl))
                data[dest] = np.repeat(idf, counts) * weight
                del freq, weight
            cursor += counts
            del tf, counts, dest, docs
            bar.update(stop - start)
    matrix = sparse.csr_matrix((data, indices, indptr), shape=(n_terms, n_docs), copy=False)
    matrix.has_sorted_indices = True  # every row's passages ascending (module docstring)
    return BM25Index(matrix, table, idf, average_idf)
