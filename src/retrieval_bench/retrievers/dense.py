"""The dense arm: cosine similarity over L2-normalised vectors in a FAISS IndexFlatIP.

Filters go into FAISS as an id selector, so the pool is ranked among allowed passages only
(never over-fetched and dropped).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import faiss
import numpy as np

from retrieval_bench.retrievers.base import Ranked, TieBreak


class DenseRetriever:
    name = "dense"

    def __init__(
        self,
        passage_ids: Sequence[str],
        passage_vectors: np.ndarray,
        encode_queries: Callable[[list[str]], np.ndarray],
    ) -> None:
        vectors = np.ascontiguousarray(passage_vectors, dtype=np.float32)
        self.index = faiss.IndexFlatIP(vectors.shape[1])
        self.index.add(vectors)
        self.encode_queries = encode_queries
        self.tie_break = TieBreak(passage_ids)
        self.n_passages = len(passage_ids)

    def search(
        self, queries: Sequence[str], k: int, allowed: Sequence[np.ndarray | None]
    ) -> list[Ranked]:
        vectors = np.ascontiguousarray(self.encode_queries(list(queries)), dtype=np.float32)
        results: list[Ranked | None] = [None] * len(queries)
        # One FAISS call per distinct filter: most queries share "no filter" or a city.
        groups: dict[bytes | None, list[int]] = {}
        masks: dict[bytes | None, np.ndarray | None] = {}
        for qi, mask in enumerate(allowed):
            key = None if mask is None else np.packbits(mask).tobytes()
            groups.setdefault(key, []).append(qi)
            masks[key] = mask
        for key, members in groups.items():
            for qi, ranked in zip(
                members, self._search_group(vectors[members], k, masks[key]), strict=True
            ):
                results[qi] = ranked
        return [r for r in results if r is not None]

    def _search_group(self, vectors: np.ndarray, k: int, mask: np.ndarray | None) -> list[Ranked]:
        n_allowed = self.n_passages if mask is None else int(mask.sum())
        params = None
        if mask is not None:
            selector = faiss.IDSelectorBatch(np.flatnonzero(mask).astype(np.int64))
            params = faiss.SearchParameters(sel=selector)
        out = []
        # Fetch one extra: a tie at the cut must be broken by id, as everywhere else, so the
        # fetch grows until the last fetched score falls below the k-th (or nothing is left).
        fetch = min(k + 1, n_allowed)
        scores, indices = self._raw_search(vectors, fetch, params)
        for row, vector in enumerate(vectors):
            sc, idx = scores[row], indices[row]
            row_fetch = fetch
            while (
                len(idx) == row_fetch
                and row_fetch < n_allowed
                and len(idx) > k
                and sc[-1] == sc[k - 1]
            ):
                row_fetch = min(2 * row_fetch, n_allowed)
                sc, idx = (a[0] for a in self._raw_search(vector[None, :], row_fetch, params))
            top_idx, top_sc = self.tie_break.top(idx, sc, k)
            out.append(Ranked(indices=top_idx, scores=top_sc, requested=k))
        return out

    def _raw_search(
        self, vectors: np.ndarray, fetch: int, params: faiss.SearchParameters | None
    ) -> tuple[list[np.ndarray], list[np.ndarray]]:
        if fetch == 0:
            empty = [np.empty(0, np.float64)] * len(vectors), [np.empty(0, np.int64)] * len(vectors)
            return empty
        scores, indices = self.index.search(vectors, fetch, params=params)
        valid = indices >= 0
        return (
            [s[v].astype(np.float64) for s, v in zip(scores, valid, strict=True)],
            [i[v].astype(np.int64) for i, v in zip(indices, valid, strict=True)],
        )
