"""The dense arm: cosine similarity over L2-normalised vectors in a FAISS index.

The index is exact `Flat` (IndexFlatIP) unless `dense.index` names another FAISS factory string
(see dense_index.py); an approximate index also keeps an exact Flat index when
`dense.recall_vs_exact` is on, and `index_info()` reports recall@k of the approximate pools
against the exact ones. Filters go into FAISS as an id selector, so the pool is ranked among
allowed passages only (never over-fetched and dropped).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import faiss
import numpy as np

from retrieval_bench.progress import progress
from retrieval_bench.retrievers.base import Ranked, shared_tie_break
from retrieval_bench.retrievers.dense_index import DenseIndexConfig, FaissIndex, build_index


class DenseRetriever:
    name = "dense"

    def __init__(
        self,
        passage_ids: Sequence[str],
        passage_vectors: np.ndarray,
        encode_queries: Callable[[list[str]], np.ndarray],
        config: DenseIndexConfig | None = None,
        vectors_key: str | None = None,
    ) -> None:
        config = config or DenseIndexConfig()
        vectors = np.ascontiguousarray(passage_vectors, dtype=np.float32)
        self.index = build_index(vectors, config, vectors_key)
        self.exact_index: FaissIndex | None = None
        if not self.index.exact and config.recall_vs_exact:
            self.exact_index = build_index(vectors, DenseIndexConfig(), vectors_key)
        # recall_vs_exact@k: k -> [sum over queries of |approx & exact| / |exact|, queries]
        self._recall: dict[int, list[float]] = {}
        self.encode_queries = encode_queries
        self.tie_break = shared_tie_break(passage_ids)
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
        with progress("ranking queries (dense)", len(queries), "query") as bar:
            for key, members in groups.items():
                group = self._search_group(self.index, vectors[members], k, masks[key])
                for qi, ranked in zip(members, group, strict=True):
                    results[qi] = ranked
                if self.exact_index is not None:
                    exact = self._search_group(self.exact_index, vectors[members], k, masks[key])
                    self._add_recall(k, group, exact)
                bar.update(len(members))
        return [r for r in results if r is not None]

    def _add_recall(self, k: int, approx: list[Ranked], exact: list[Ranked]) -> None:
        total = self._recall.setdefault(k, [0.0, 0])
        for a, e in zip(approx, exact, strict=True):
            if len(e.indices):
                total[0] += len(np.intersect1d(a.indices, e.indices)) / len(e.indices)
                total[1] += 1

    def index_info(self) -> dict[str, Any]:
        """For the manifest: the index, and recall@k of its pools against exact Flat ones."""
        info = self.index.describe()
        for k, (found, n) in sorted(self._recall.items()):
            info[f"recall_vs_exact@{k}"] = found / n if n else None
            info["recall_queries"] = n
        return info

    def _search_group(
        self, index: FaissIndex, vectors: np.ndarray, k: int, mask: np.ndarray | None
    ) -> list[Ranked]:
        n_allowed = self.n_passages if mask is None else int(mask.sum())
        selector = index.selector(mask)
        out = []
        # Fetch one extra: a tie at the cut must be broken by id, as everywhere else, so the
        # fetch grows until the last fetched score falls below the k-th (or nothing is left).
        fetch = min(k + 1, n_allowed)
        scores, indices = self._raw_search(index, vectors, fetch, selector)
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
                sc, idx = (
                    a[0] for a in self._raw_search(index, vector[None, :], row_fetch, selector)
                )
            top_idx, top_sc = self.tie_break.top(idx, sc, k)
            out.append(Ranked(indices=top_idx, scores=top_sc, requested=k))
        return out

    def _raw_search(
        self,
        index: FaissIndex,
        vectors: np.ndarray,
        fetch: int,
        selector: faiss.IDSelector | None,
    ) -> tuple[list[np.ndarray], list[np.ndarray]]:
        if fetch == 0:
            return [np.empty(0, np.float64)] * len(vectors), [np.empty(0, np.int64)] * len(vectors)
        scores, indices = index.search(vectors, fetch, selector)
        valid = indices >= 0
        return (
            [s[v].astype(np.float64) for s, v in zip(scores, valid, strict=True)],
            [i[v].astype(np.int64) for i, v in zip(indices, valid, strict=True)],
        )
