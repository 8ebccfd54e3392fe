"""The `bm25:` config node, apart from the scorer that reads it, so the config schema imports
no scoring library."""

from __future__ import annotations

from dataclasses import dataclass

BM25_IMPLS = ("sparse", "rank_bm25")
# Which BM25 formula (`bm25.variant`): rank_bm25's BM25Okapi (the default), or Lucene's
# BM25Similarity as Elasticsearch and OpenSearch compute it (its idf, no (k1 + 1) factor, the
# document length stored as one byte, float32 arithmetic; retrievers/bm25_build.py).
BM25_VARIANTS = ("rank_bm25", "lucene")


@dataclass  # not frozen: Hydra overrides (bm25.k1=1.2) must be able to set it
class BM25Config:
    k1: float = 1.5
    b: float = 0.75
    epsilon: float = 0.25  # rank_bm25's floor for negative IDFs (the lucene variant has none)
    impl: str = "sparse"
    variant: str = "rank_bm25"
