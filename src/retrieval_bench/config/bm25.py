"""The `bm25:` config node, apart from the scorer that reads it, so the config schema imports
no scoring library."""

from __future__ import annotations

from dataclasses import dataclass

BM25_IMPLS = ("sparse", "rank_bm25")


@dataclass  # not frozen: Hydra overrides (bm25.k1=1.2) must be able to set it
class BM25Config:
    k1: float = 1.5
    b: float = 0.75
    epsilon: float = 0.25
    impl: str = "sparse"
