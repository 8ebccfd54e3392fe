"""The dense arm's keyword arguments (`arms.dense`): its FAISS index settings, and overrides of
the job's `encoder:` node for this arm; apart from the FAISS code that reads them, so the config
schema imports no index library."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from retrieval_bench.errors import ConfigError


@dataclass
class DenseIndexConfig:
    """The index settings of a dense arm (not frozen: Hydra overrides must be able to set
    them)."""

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
        """The first bad value raises ConfigError naming its field (the arm's node prefixes
        it: `arms.dense.nprobe`)."""
        if not self.index.strip():
            raise ConfigError("index", "needs a FAISS factory string, e.g. Flat or HNSW32")
        if self.nprobe < 1:
            raise ConfigError("nprobe", f"must be a positive integer, got {self.nprobe}")
        if self.ef_search < 1:
            raise ConfigError("ef_search", f"must be a positive integer, got {self.ef_search}")
        if self.train_size < 0:
            raise ConfigError("train_size", f"must be >= 0, got {self.train_size}")


@dataclass
class DenseArmConfig(DenseIndexConfig):
    """The keyword arguments of a dense arm's node (`retrieval_bench.retrievers.dense.
    DenseArmSpec` is this dataclass with `build`): the index settings, and `encoder`, keys of
    the job's `encoder:` node this arm sets otherwise (`{model: DIR, ...}`, `_target_`
    included), so two encoders can run, and be fused, in one job."""

    encoder: dict[str, Any] = field(default_factory=dict)
    """Keys of the job's `encoder:` node this arm sets otherwise (`{model: DIR}`, `_target_`
    included); empty: the job's encoder."""

    def validate(self) -> None:
        super().validate()
        from retrieval_bench.config.encoder import EncoderConfig
        from retrieval_bench.config.typed import with_overrides

        try:
            with_overrides(EncoderConfig(), self.encoder)
        except ConfigError as error:
            raise ConfigError(f"encoder.{error.key}", error.message) from error
