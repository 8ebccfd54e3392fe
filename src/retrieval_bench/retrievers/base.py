"""What the text-only arms (BM25, dense) share: a retriever that ranks query texts, made an Arm."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from retrieval_bench.records import EvalQuery, Ranked


class TextRetriever(Protocol):
    """A retriever that reads only a query's text (BM25, dense): `TextArm` makes it an Arm."""

    def search(
        self, queries: Sequence[str], k: int, allowed: Sequence[np.ndarray | None]
    ) -> list[Ranked]: ...


class TextArm:
    """An Arm (retrieval_bench.protocols) over a retriever that ranks query texts; its manifest
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

    def time_query(
        self, query: EvalQuery, k: int, mask: np.ndarray | None
    ) -> dict[str, float] | None:
        """The retriever's own timing of one query, split into `encode_ms` and `search_ms`
        (job.latency); None when it has none (the probe then times `search` whole)."""
        timed = getattr(self.retriever, "time_query", None)
        return None if timed is None else dict(timed(query.query, k, mask))
