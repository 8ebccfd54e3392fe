"""A query's BM25 scores from the index's CSR rows: compiled when built, numpy otherwise.

Both paths add each passage's contributions in query-token order starting from 0.0, the
additions rank_bm25's `get_scores` makes, so both are bit-identical to it
(tests/unit/retrievers/test_bm25.py runs both). The compiled one (`_bm25kernel.c`) reads each
posting once and marks the matched passages as it goes, where numpy concatenates the rows,
bincounts them and compares every passage's score: 2-3x less time per query (BENCHMARKS.md).

A posting's weight is `idf[row] * table[code]` where the index codes its postings (bm25_build:
the product the build would otherwise have stored, so the same double), or `matrix.data` itself
where it has no table.

Lucene's formula (`lucene=True`): the table (or the postings) hold float32 denominators and
`idf` Lucene's idf; a repeated query term is one clause, weighted by its count (`w` = count x
idf in float32, Anserini's bag of words); a posting adds the float32 `w - w / d` and each
passage's double sum is rounded to float32, on both paths (bm25_build's module docstring).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import sparse

from retrieval_bench.compiled import extension


def _kernel() -> Any:
    return extension("retrievers._bm25kernel")


def kernel_available() -> bool:
    """Whether the compiled kernel was built at install time."""
    return _kernel() is not None


def score_rows(
    matrix: sparse.csr_matrix,
    table: np.ndarray | None,
    indptr64: np.ndarray,
    idf: np.ndarray,
    rows: Sequence[int],
    compiled: bool = True,
    lucene: bool = False,
    sure_positive: bool = True,
    n_codes: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """(scores over every passage, passages sharing at least one of the rows, ascending).

    `matrix.data` holds codes into `table` (None: the weights themselves; bm25_build.BM25Index),
    `indptr64` is `matrix.indptr` as int64 (the kernel's layout), `idf` each row's IDF;
    `compiled=False` takes the numpy path even where the kernel is built. `lucene`: Lucene's
    formula (module docstring), with `sure_positive` False where a term score may round to 0;
    `n_codes`: the codes in use in `table` (the kernel then gives a long row its scores per code
    once, the same floats, instead of a division per posting)."""
    n_docs = matrix.shape[1]
    kernel = _kernel() if compiled else None
    if kernel is not None and matrix.has_sorted_indices:
        scores = np.empty(n_docs)  # the kernel zeroes it tile by tile, as it sums
        matched = np.empty(n_docs, dtype=np.int64)
        arrays = (indptr64, matrix.indices, matrix.data, table, idf)
        count = kernel.score_rows(*arrays, rows, scores, matched, lucene, sure_positive, n_codes)
        return scores, matched[:count]
    indptr, indices, data = matrix.indptr, matrix.indices, matrix.data
    qweights = None
    if lucene:
        rows, qweights = lucene_clauses(rows, idf)

    def row_weights(q: int, r: int) -> np.ndarray:
        values = data[indptr[r] : indptr[r + 1]]
        if qweights is not None:  # Lucene: w - w / d in float32
            w = np.float32(qweights[q])
            d = (values if table is None else table[values]).astype(np.float32)
            return (w - w / d).astype(np.float64)
        return values if table is None else idf[r] * table[values]

    if len(rows) == 1:
        docs = indices[indptr[rows[0]] : indptr[rows[0] + 1]]
        contributions = row_weights(0, rows[0])
    else:
        docs = np.concatenate([indices[indptr[r] : indptr[r + 1]] for r in rows])
        contributions = np.concatenate([row_weights(q, r) for q, r in enumerate(rows)])
    # bincount adds each passage's contributions in array order, i.e. query-token order,
    # from 0.0: the same additions, in the same order, as rank_bm25's `score +=`.
    scores = np.bincount(docs, weights=contributions, minlength=n_docs)
    if qweights is not None:  # Lucene's (float) of the double sum
        scores = scores.astype(np.float32).astype(np.float64)
        if not sure_positive:
            return scores, np.flatnonzero(np.bincount(docs, minlength=n_docs))
    if (idf[rows] > 0).all():
        # Every contribution is > 0, so a passage is matched iff its score is > 0.
        return scores, np.flatnonzero(scores > 0)
    return scores, np.flatnonzero(np.bincount(docs, minlength=n_docs))


def top_rows(
    matrix: sparse.csr_matrix,
    table: np.ndarray | None,
    indptr64: np.ndarray,
    idf: np.ndarray,
    rows: Sequence[int],
    id_order: np.ndarray,
    k: int,
    allowed: np.ndarray | None,
    scratch: np.ndarray,
    lucene: bool = False,
    sure_positive: bool = True,
    n_codes: int = 0,
) -> tuple[np.ndarray, np.ndarray, bool, bool] | None:
    """(the best k passages, their scores, whether any passage matched, whether any matched
    one is `allowed`), best first by score then `id_order` descending (TieBreak.top's order),
    or None where the kernel is not built. One pass over the rows' postings, then only the
    passages at or above a floor: the k-th largest of 64-passage blocks' maxima (no mask; kept
    as it rises, tile by tile), or taken from a sample (a mask, or a negative IDF), exact
    either way (`_bm25kernel.c`); where
    scores + TieBreak.top gather, filter and partition every matched passage's score.
    `matrix`, `table`, `indptr64`, `idf`, `lucene`, `sure_positive`, `n_codes`: as score_rows;
    `scratch`: float64 zeros, one per passage; left zeroed."""
    kernel = _kernel()
    if kernel is None or not matrix.has_sorted_indices:
        return None
    index = np.empty(k, dtype=np.int64)
    score = np.empty(k, dtype=np.float64)
    mask = None if allowed is None else allowed.view(np.uint8)
    arrays = (indptr64, matrix.indices, matrix.data, table, idf)
    count, matched, passed = kernel.top_rows(
        *arrays, rows, id_order, k, mask, scratch, index, score, lucene, sure_positive, n_codes
    )
    return index[:count], score[:count], bool(matched), bool(passed)


def lucene_clauses(rows: Sequence[int], idf: np.ndarray) -> tuple[list[int], np.ndarray]:
    """Lucene's query over the rows (Anserini's bag of words: one clause per distinct term,
    boosted by its count): each row once, in first-occurrence order, with its float32 weight
    `(float) count * idf` (BM25Scorer's boost x idf), held in float64. The numpy path's; the
    kernel does the same itself (`lucene_clauses` in `_bm25kernel.c`)."""
    counts = dict.fromkeys(rows, 0)
    for row in rows:
        counts[row] += 1
    distinct = list(counts)
    boost = np.fromiter(counts.values(), np.float32, len(distinct))
    return distinct, (boost * idf[distinct].astype(np.float32)).astype(np.float64)
