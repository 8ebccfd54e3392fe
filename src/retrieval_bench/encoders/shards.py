"""Sharded encode: the corpus cut into N contiguous shards, each its own embedding-cache entry.

Why: one process encodes a million passages in days on CPU and minutes per GPU; shards let
independent jobs (a Hydra multirun with the joblib launcher, a SLURM array) encode at once.
A shard's entry is keyed like any other (encoder identity, role, the shard's texts), so:

* a job that asks for shard i encodes it, or finds it already there (`encode_shard`);
* the job that retrieves assembles the shards from the cache without encoding them again,
  and after an interrupted sharded encode encodes only the shards still missing
  (`encode_sharded`); with `require=True` it encodes nothing and names the missing shards
  and the command that encodes them (`MissingShards`).

Shards are `numpy.array_split`'s: sizes differ by at most one passage, in corpus order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from retrieval_bench.encoders.cache import CacheStats, EmbeddingCache
from retrieval_bench.errors import BenchError, ConfigError
from retrieval_bench.protocols import Encoder

ROLE = "passages"


class MissingShards(BenchError):
    """`encoder.require_shards=true` and some shards are not in the embedding cache."""

    def __init__(self, missing: Sequence[int], shards: int, overrides: Sequence[str] = ()) -> None:
        self.missing = list(missing)
        self.shards = shards
        self.overrides = list(overrides)
        super().__init__(self._message())

    def _message(self) -> str:
        keep = [
            o
            for o in self.overrides
            if not o.lstrip("+~").startswith(("encoder.require_shards", "encoder.shard_only"))
        ]
        if not any(o.lstrip("+").startswith("encoder.shards=") for o in keep):
            keep.append(f"encoder.shards={self.shards}")
        listed = ",".join(map(str, self.missing))
        command = " ".join(
            ["python -m run -m", *keep, f"encoder.shard_only={listed}", "hydra/launcher=parallel"]
        )
        return (
            f"config key 'encoder.require_shards': {len(self.missing)} of {self.shards} shards "
            f"are not in the embedding cache: shard {listed}. Encode them with: {command}"
        )

    def with_overrides(self, overrides: Sequence[str]) -> MissingShards:
        """The same error, its command built from the job's own command-line overrides."""
        return MissingShards(self.missing, self.shards, overrides)


def shard_bounds(count: int, shards: int) -> list[tuple[int, int]]:
    """[start, end) of each shard of `count` passages; refuses a count the corpus cannot fill."""
    if shards < 1 or shards > count:
        raise ConfigError(
            "encoder.shards",
            f"{shards} shards cannot split a corpus of {count} passages: use 1 to {count}",
        )
    ends = np.cumsum([len(part) for part in np.array_split(np.arange(count), shards)])
    starts = [0, *ends[:-1].tolist()]
    return list(zip(starts, ends.tolist(), strict=True))


def encode_shard(
    cache: EmbeddingCache, encoder: Encoder, texts: Sequence[str], shards: int, index: int
) -> CacheStats:
    """Encode shard `index` into the cache (or find it there); its vectors are not returned."""
    start, end = shard_bounds(len(texts), shards)[index]
    _, stats = cache.encode(encoder, list(texts[start:end]), ROLE)
    return stats


def encode_sharded(
    cache: EmbeddingCache,
    encoder: Encoder,
    texts: Sequence[str],
    shards: int,
    require: bool = False,
) -> tuple[np.ndarray, CacheStats]:
    """Every shard from the cache, encoding the missing ones (none with `require`), joined.

    The stats' key hashes the shard keys in order: the assembled matrix's content key.
    """
    parts = [list(texts[start:end]) for start, end in shard_bounds(len(texts), shards)]
    if require:
        missing = [i for i, part in enumerate(parts) if cache.lookup(encoder, part, ROLE) is None]
        if missing:
            raise MissingShards(missing, shards)
    arrays = []
    total = CacheStats(cold_seconds=0.0)  # cold seconds: summed over the shards
    digest = hashlib.sha256(b"retrieval_bench.encoders.shards/v1")
    for part in parts:
        array, stats = cache.encode(encoder, part, ROLE)
        arrays.append(array)
        total = total + stats
        digest.update(stats.key.encode())
    joined = np.ascontiguousarray(np.concatenate(arrays), dtype=np.float32)
    return joined, CacheStats(
        total.encoded, total.cached, digest.hexdigest(), total.cold_seconds, total.disk_bytes
    )
