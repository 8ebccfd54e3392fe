"""The BM25 kernel's fused top k checked against the unfused path it stands for."""

from __future__ import annotations

from typing import Any

import numpy as np


def check_fused_top(
    sparse: Any, query: list[str], k: int, tie: Any, mask: np.ndarray | None, scoring_path: str
) -> None:
    """SparseBM25.top for one query equals scores + TieBreak.top over the allowed matched
    passages: passages, order, scores and the two flags (the numpy path has no fused top)."""
    fused = sparse.top(query, k, tie.id_order, mask)
    if fused is None:  # the numpy path: the caller uses scores + TieBreak.top
        assert scoring_path == "numpy"
        return
    scores, matched = sparse.scores(query)
    allowed = matched if mask is None else matched[mask[matched]]
    indices, top = tie.top(allowed, scores[allowed], k)
    assert np.array_equal(fused[0], indices) and np.array_equal(fused[1], top)
    assert (fused[2], fused[3]) == (len(matched) > 0, len(allowed) > 0)
