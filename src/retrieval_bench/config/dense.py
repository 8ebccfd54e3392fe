"""The `dense:` config node, apart from the FAISS code that reads it, so the config schema
imports no index library."""

from __future__ import annotations

from dataclasses import dataclass

from retrieval_bench.errors import ConfigError


@dataclass
class DenseIndexConfig:
    """The `dense:` config node (not frozen: Hydra overrides must be able to set it)."""

    index: str = "Flat"
    """FAISS index_factory string; anything but "Flat" is approximate."""
    nprobe: int = 16
    """IVF: inverted lists probed per query (more: slower, closer to exact)."""
    ef_search: int = 128
    """HNSW: candidate list size at search time (raised to the fetch size when smaller)."""
    recall_vs_exact: bool = True
    """For an approximate index, also search exact Flat and report recall@k against it."""
    train_size: int = 0
    """IVF/PQ training: at most this many vectors (a seeded sample); 0 lets FAISS subsample (up
    to 256 per IVF list, which at a million passages means minutes of k-means)."""

    def validate(self) -> None:
        if not self.index.strip():
            raise ConfigError("dense.index", "needs a FAISS factory string, e.g. Flat or HNSW32")
        if self.nprobe < 1:
            raise ConfigError("dense.nprobe", f"must be a positive integer, got {self.nprobe}")
        if self.ef_search < 1:
            raise ConfigError(
                "dense.ef_search", f"must be a positive integer, got {self.ef_search}"
            )
        if self.train_size < 0:
            raise ConfigError("dense.train_size", f"must be >= 0, got {self.train_size}")
