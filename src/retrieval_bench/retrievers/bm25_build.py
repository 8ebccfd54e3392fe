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

`arms.bm25.variant=lucene` builds the same structure for Lucene's BM25Similarity (Lucene 9, what
Elasticsearch and OpenSearch run; `lucene_stats`): a term's idf is
`(float) ln(1 + (N - n + 0.5) / (n + 0.5))` with N the passages that hold at least one token
(Lucene's docCount); a passage's length is stored as one byte (`SmallFloat.intToByte4`) and read
back through its 256-entry table; avgdl is `(float) (sumTotalTermFreq / docCount)`; and a term
scores `w - w / (1 + tf * cache[norm])` in float32, with `w = boost * idf` (the query's count of
the term) and `cache[norm] = 1 / (k1 * ((1 - b) + b * length(norm) / avgdl))`, all float32 as
Lucene computes them. The code table then holds each (tf, length) pair's float32 denominator
`1 + tf * cache[norm]`, and a query forms `w - w / table[code]` in float32 (bm25_kernel), so the
scores are Lucene's own float32 values, summed in double and rounded to float32 as Lucene's
disjunction scorers do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import sparse

from retrieval_bench.config.bm25 import BM25_VARIANTS, BM25Config
from retrieval_bench.errors import ConfigError
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
    # "lucene": `table` (or the postings) hold Lucene's denominators, not weights (module doc).
    variant: str = "rank_bm25"

    def weights(self) -> sparse.csr_matrix:
        """The float64 weights the postings stand for: `idf[row] * table[code]`, the product a
        query forms (the matrix itself where the postings hold weights). The lucene variant's
        postings hold denominators whose weight depends on the query (module docstring)."""
        if self.variant == "lucene":
            raise ValueError("a lucene-variant index has no query-independent weights")
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


# Lucene's SmallFloat int4 encoding of a document length into one byte (Lucene 9's
# org.apache.lucene.util.SmallFloat: intToByte4 / byte4ToInt): lengths below NUM_FREE_VALUES are
# exact, longer ones keep 4 significant bits.
_MAX_INT4 = 231  # longToInt4(Integer.MAX_VALUE)
NUM_FREE_VALUES = 255 - _MAX_INT4


def _long_to_int4(value: np.ndarray) -> np.ndarray:
    """SmallFloat.longToInt4 for non-negative int64 values."""
    value = value.astype(np.int64)
    bits = np.zeros(len(value), dtype=np.int64)  # 64 - numberOfLeadingZeros
    nonzero = value > 0
    bits[nonzero] = np.floor(np.log2(value[nonzero])).astype(np.int64) + 1
    # log2 of a large integer may round up at a power of two minus one: correct it exactly.
    too_far = nonzero & ((value >> np.maximum(bits - 1, 0)) == 0)
    bits[too_far] -= 1
    shift = np.maximum(bits - 4, 0)
    encoded = (value >> shift) & 0x07
    encoded |= (shift + 1) << 3
    return np.where(bits < 4, value, encoded)


def int_to_byte4(lengths: np.ndarray) -> np.ndarray:
    """SmallFloat.intToByte4: each length's norm byte (0-255), as BM25Similarity.computeNorm
    stores it."""
    lengths = np.asarray(lengths, dtype=np.int64)
    if len(lengths) and int(lengths.min()) < 0:
        raise ValueError("a length must be >= 0")
    coded = NUM_FREE_VALUES + _long_to_int4(lengths - NUM_FREE_VALUES)
    return np.where(lengths < NUM_FREE_VALUES, lengths, coded).astype(np.int64)


def byte4_to_int(norms: np.ndarray) -> np.ndarray:
    """SmallFloat.byte4ToInt: the length a norm byte stands for (BM25Similarity.LENGTH_TABLE)."""
    norms = np.asarray(norms, dtype=np.int64)
    i = norms - NUM_FREE_VALUES
    bits = i & 0x07
    shift = (i >> 3) - 1
    decoded = np.where(shift == -1, bits, (bits | 0x08) << np.maximum(shift, 0))
    return np.where(norms < NUM_FREE_VALUES, norms, NUM_FREE_VALUES + decoded)


LENGTH_TABLE = byte4_to_int(np.arange(256)).astype(np.float32)
"""BM25Similarity.LENGTH_TABLE: each norm byte's length as a float."""


@dataclass(frozen=True)
class LuceneStats:
    """The collection statistics BM25Similarity reads: docCount (passages with at least one
    token) and avgdl, as float32 from sumTotalTermFreq / docCount in double."""

    doc_count: int
    avgdl: np.float32


def lucene_stats(lengths: np.ndarray) -> LuceneStats:
    lengths = np.asarray(lengths, dtype=np.int64)
    doc_count = int(np.count_nonzero(lengths))
    total = int(lengths.sum())
    avgdl = np.float32(total / doc_count) if doc_count else np.float32(0.0)
    return LuceneStats(doc_count, avgdl)


def lucene_idf(df: np.ndarray, doc_count: int) -> np.ndarray:
    """BM25Similarity.idf per term: `(float) Math.log(1 + (docCount - docFreq + 0.5) /
    (docFreq + 0.5))`, the log in double (`math.log`, per distinct df) then rounded to float32;
    returned as float64 holding those float32 values."""
    distinct, inverse = np.unique(df, return_inverse=True)
    logs = [math.log(1.0 + ((doc_count - f) + 0.5) / (f + 0.5)) for f in distinct.tolist()]
    return np.asarray(logs, dtype=np.float64).astype(np.float32).astype(np.float64)[inverse]


def lucene_norm_cache(k1: float, b: float, avgdl: np.float32) -> np.ndarray:
    """BM25Similarity.scorer's cache: `1f / (k1 * ((1 - b) + b * LENGTH_TABLE[i] / avgdl))` for
    each norm byte i, every operation in float32 as Lucene does it (k1 and b parsed as floats)."""
    one = np.float32(1.0)
    k1f, bf = np.float32(k1), np.float32(b)
    with np.errstate(divide="ignore"):
        return one / (k1f * ((one - bf) + bf * LENGTH_TABLE / avgdl))


def lucene_denominators(
    freq: np.ndarray, doc_len: np.ndarray, k1: float, b: float, avgdl: np.float32
) -> np.ndarray:
    """Each (tf, length) pair's float32 `1f + freq * cache[norm]`, the denominator of
    BM25Scorer.score (returned as float64 holding the float32 values)."""
    cache = lucene_norm_cache(k1, b, avgdl)
    norm_inverse = cache[int_to_byte4(doc_len)]
    return (np.float32(1.0) + freq.astype(np.float32) * norm_inverse).astype(np.float64)


def _key_counts(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct keys, ascending; how many times each occurs)."""
    if len(keys) == 0 or int(keys.max()) < DENSE_KEYS:
        counts = np.bincount(keys)
        distinct = np.flatnonzero(counts)
        return distinct, counts[distinct]
    return np.unique(keys, return_counts=True)


def _saturated(
    freq: np.ndarray, doc_len: np.ndarray, avgdl: float, config: BM25Config, lucene: bool
) -> np.ndarray:
    """What a posting's (tf, length) gives the table: rank_bm25's saturated tf g (its
    expression, term for term), or Lucene's float32 denominator `1 + tf * cache[norm]`."""
    if lucene:
        return lucene_denominators(freq, doc_len, config.k1, config.b, np.float32(avgdl))
    k1, b = config.k1, config.b
    freq = freq.astype(np.float64)
    return freq * (k1 + 1) / (freq + k1 * (1 - b + b * doc_len.astype(np.float64) / avgdl))


def _code_table(
    keys: np.ndarray,
    uses: np.ndarray,
    span: int,
    avgdl: float,
    config: BM25Config,
    lucene: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """(each distinct (tf, length) key's code, the table of distinct saturated tfs) from the
    keys `tf * span + length` and their posting counts: g computed per pair with rank_bm25's
    expression (the same doubles as per posting; or Lucene's denominator), equal values merged,
    the most used first."""
    g = _saturated(keys // span, keys % span, avgdl, config, lucene)
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
    if config.variant not in BM25_VARIANTS:
        raise ConfigError(
            "arms.bm25.variant", f"'{config.variant}' is not one of: {', '.join(BM25_VARIANTS)}"
        )
    lucene = config.variant == "lucene"
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
    if lucene:
        stats = lucene_stats(lengths)
        idf = lucene_idf(df, stats.doc_count)
        average_idf = float(idf.mean()) if len(idf) else 0.0
        avgdl = float(stats.avgdl)
    else:
        idf, average_idf = _idf(df, n_docs, config.epsilon)
        avgdl = int(lengths.sum()) / n_docs
    keys, inverse = np.unique(np.concatenate([k for k, _ in seen]), return_inverse=True)
    uses = np.zeros(len(keys), dtype=np.int64)
    np.add.at(uses, inverse, np.concatenate([c for _, c in seen]))
    del seen, inverse
    key_code, values = _code_table(keys, uses, span, avgdl, config, lucene)
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
            elif lucene:  # the denominators themselves: the query's weight comes in per query
                data[dest] = _saturated(tf.data, lengths[docs], avgdl, config, True)
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
    return BM25Index(matrix, table, idf, average_idf, config.variant)
