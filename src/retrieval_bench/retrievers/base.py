"""One protocol for every arm, and the one ranking order used everywhere."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

import numpy as np

from retrieval_bench.data.records import EvalQuery

# Why a ranking is empty (`Ranked.empty_reason`), counted per stage in metrics.json: the query
# has no term once tokenised (only punctuation), none of its terms is in the corpus, the filter
# left no candidate, or the arm returned nothing for a reason it did not give.
NO_QUERY_TERMS = "no_query_terms"
NO_MATCHING_TERMS = "no_matching_terms"
FILTERED_OUT = "filtered_out"
NO_CANDIDATES = "no_candidates"


@dataclass(frozen=True)
class Ranked:
    """An arm's candidate pool for one query: passage indices (into the corpus) and scores;
    an empty pool says why in `empty_reason`."""

    indices: np.ndarray  # int64, best first
    scores: np.ndarray  # float64, same length
    requested: int
    empty_reason: str | None = None

    @property
    def returned(self) -> int:
        return len(self.indices)


class Retriever(Protocol):
    """Ranks the whole corpus, restricted to `allowed` before ranking (never after a cut)."""

    name: str

    def search(
        self, queries: Sequence[str], k: int, allowed: Sequence[np.ndarray | None]
    ) -> list[Ranked]: ...


class TieBreak:
    """Score descending, then passage id descending: the order trec_eval imposes.

    `id_order[i]` is passage i's position among all ids sorted ascending, so ties can be broken
    with integer keys instead of string comparisons.
    """

    def __init__(self, ids: Sequence[str]) -> None:
        order = np.argsort(np.asarray(ids, dtype=object), kind="stable")
        self.id_order = np.empty(len(ids), dtype=np.int64)
        self.id_order[order] = np.arange(len(ids))

    def top(
        self, candidates: np.ndarray, scores: np.ndarray, k: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """The best k of `candidates` (indices) given their `scores`, in the canonical order."""
        if k > 0 and len(candidates) > max(8 * k, 4096):
            # Exact pre-filter for long candidate lists (BM25 matches most of a corpus): the
            # k-th largest of 8k block maxima is k distinct scores, so at least k candidates
            # score >= it and every member of the top k (ties included) survives the cut.
            block = len(scores) // (8 * k)
            maxima = scores[: 8 * k * block].reshape(8 * k, block).max(axis=1)
            if len(scores) > 8 * k * block:
                maxima = np.append(maxima, scores[8 * k * block :].max())
            floor = np.partition(maxima, len(maxima) - k)[len(maxima) - k]
            keep = scores >= floor
            candidates, scores = candidates[keep], scores[keep]
        if len(candidates) > k:
            # Keep everything tied with the k-th best so the tie-break decides who stays.
            kth = np.partition(-scores, k - 1)[k - 1]
            keep = -scores <= kth
            candidates, scores = candidates[keep], scores[keep]
        order = np.lexsort((-self.id_order[candidates], -scores))[:k]
        return candidates[order], scores[order]


@lru_cache(maxsize=4)
def _tie_break_for(ids: tuple[str, ...]) -> TieBreak:
    return TieBreak(ids)


def shared_tie_break(ids: Sequence[str]) -> TieBreak:
    """The one TieBreak for a corpus: the pipeline and every arm of a job (and every job of a
    multirun) order the same ids, and building one sorts every id (about 1 s at 1M passages)."""
    return _tie_break_for(tuple(ids))


class TextRetriever(Protocol):
    """A retriever that reads only a query's text (BM25, dense): `TextArm` makes it an Arm."""

    def search(
        self, queries: Sequence[str], k: int, allowed: Sequence[np.ndarray | None]
    ) -> list[Ranked]: ...


class TextArm:
    """An Arm (retrieval_bench.components) over a retriever that ranks query texts; its manifest
    record is the retriever's `index_info()` when it has one."""

    def __init__(self, retriever: TextRetriever) -> None:
        self.retriever = retriever

    def search(
        self, queries: Sequence[EvalQuery], k: int, allowed: Sequence[np.ndarray | None]
    ) -> list[Ranked]:
        return self.retriever.search([q.query for q in queries], k, allowed)

    def info(self) -> dict[str, Any]:
        index_info = getattr(self.retriever, "index_info", None)
        return dict(index_info()) if index_info is not None else {}
