"""BGE-M3's three outputs from one forward pass, and their on-disk cache.

`BGEM3FlagModel.encode(return_dense=True, return_sparse=True, return_colbert_vecs=True)` runs
the model once per batch and returns, per text, a dense vector, lexical weights (token id ->
weight) and ColBERT vectors (one per token after CLS). `M3Outputs` holds them as plain arrays:

* `dense`: float32 (n, d), unit rows;
* sparse: CSR arrays `sparse_indptr` (n + 1), `sparse_indices` (token ids) and `sparse_data`
  (float32 weights), one row per text;
* ColBERT: `colbert_vectors` float32 (total tokens, d), text i's rows being
  `colbert_offsets[i]:colbert_offsets[i + 1]`.

The cache stores them as one `.npz` (read with `allow_pickle=False`: never a pickle, so a cache
file cannot run code) plus a JSON sidecar written after it, under `<cache_dir>/m3/`, keyed like
the embedding cache (model identity, role and texts), through the same lock and atomic-replace
mechanism (`embedding_cache.read_or_build`) so the jobs of a multirun can share it.
"""

from __future__ import annotations

import json
import logging
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from retrieval_bench.encoders.cache import (
    ROLES,
    CacheEntryInvalid,
    CacheStats,
    cache_key,
    read_or_build,
)
from retrieval_bench.encoders.flag import BGEM3Encoder, ModelRole
from retrieval_bench.io.atomic import atomic_writer
from retrieval_bench.io.locks import lock_path_for
from retrieval_bench.io.strict_json import strict_dumps

logger = logging.getLogger(__name__)

M3_CACHE_FORMAT = 1
_ARRAYS = (
    "dense",
    "sparse_indptr",
    "sparse_indices",
    "sparse_data",
    "colbert_vectors",
    "colbert_offsets",
)

M3_ROLE = ModelRole("arms.m3", "leave the m3 arms out of retriever.arms")
"""The BGE-M3 arms' model comes from the `m3:` node: missing-model messages name its keys."""


@dataclass(frozen=True)
class M3Outputs:
    """BGE-M3's dense, sparse and ColBERT outputs for n texts, as plain arrays (module doc)."""

    dense: np.ndarray
    sparse_indptr: np.ndarray
    sparse_indices: np.ndarray
    sparse_data: np.ndarray
    colbert_vectors: np.ndarray
    colbert_offsets: np.ndarray

    def __len__(self) -> int:
        return int(self.dense.shape[0])

    def lexical_weights(self, i: int) -> dict[str, float]:
        """Text i's lexical weights in FlagEmbedding's own form (token id as str -> weight)."""
        start, end = self.sparse_indptr[i], self.sparse_indptr[i + 1]
        return {
            str(t): float(w)
            for t, w in zip(
                self.sparse_indices[start:end], self.sparse_data[start:end], strict=True
            )
        }

    def colbert(self, i: int) -> np.ndarray:
        """Text i's ColBERT vectors (tokens x d)."""
        return self.colbert_vectors[self.colbert_offsets[i] : self.colbert_offsets[i + 1]]

    def arrays(self) -> dict[str, np.ndarray]:
        return {name: getattr(self, name) for name in _ARRAYS}

    @classmethod
    def from_flag(cls, out: dict[str, Any], dim: int) -> M3Outputs:
        """From `BGEM3FlagModel.encode`'s dict (a list of texts' outputs, in input order)."""
        dense = np.asarray(out["dense_vecs"], dtype=np.float32).reshape(-1, dim)
        # FlagEmbedding normalises in the model's dtype; redo it in float32 (as flag.py does).
        dense = dense / np.maximum(np.linalg.norm(dense, axis=1, keepdims=True), 1e-12)
        indptr = [0]
        indices: list[int] = []
        data: list[float] = []
        for weights in out["lexical_weights"]:
            row = sorted((int(token), float(w)) for token, w in weights.items())
            indices.extend(t for t, _ in row)
            data.extend(w for _, w in row)
            indptr.append(len(indices))
        vectors = [np.asarray(v, dtype=np.float32).reshape(-1, dim) for v in out["colbert_vecs"]]
        lengths = [len(v) for v in vectors]
        return cls(
            dense=np.ascontiguousarray(dense, dtype=np.float32),
            sparse_indptr=np.asarray(indptr, dtype=np.int64),
            sparse_indices=np.asarray(indices, dtype=np.int64),
            sparse_data=np.asarray(data, dtype=np.float32),
            colbert_vectors=(
                np.ascontiguousarray(np.concatenate(vectors), dtype=np.float32)
                if vectors
                else np.zeros((0, dim), dtype=np.float32)
            ),
            colbert_offsets=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
        )

    def check(self, count: int) -> None:
        """Raise CacheEntryInvalid unless the arrays describe `count` texts consistently."""
        n = count
        problems = []
        if self.dense.ndim != 2 or self.dense.shape[0] != n:
            problems.append(f"dense shape {self.dense.shape}")
        if self.sparse_indptr.shape != (n + 1,) or self.colbert_offsets.shape != (n + 1,):
            problems.append("offsets do not have one entry per text plus one")
        elif (
            self.sparse_indptr[-1] != len(self.sparse_indices)
            or len(self.sparse_indices) != len(self.sparse_data)
            or self.colbert_offsets[-1] != len(self.colbert_vectors)
            or np.any(np.diff(self.colbert_offsets) <= 0)
        ):
            problems.append("offsets do not match the arrays (or a text has no ColBERT vector)")
        if self.colbert_vectors.ndim != 2 or self.colbert_vectors.shape[1:] != self.dense.shape[1:]:
            problems.append(f"ColBERT vectors shape {self.colbert_vectors.shape}")
        for name in ("dense", "sparse_data", "colbert_vectors"):
            if getattr(self, name).dtype != np.float32:
                problems.append(f"{name} is {getattr(self, name).dtype}, not float32")
        if problems:
            raise CacheEntryInvalid("; ".join(problems))


class M3Encoder(BGEM3Encoder):
    """BGE-M3 returning all three outputs of one forward pass (loading, identity and the
    per-process model memo are BGEM3Encoder's; its model is the m3 arm node's)."""

    role = M3_ROLE

    def identity(self) -> dict[str, Any]:
        return {**super().identity(), "outputs": "dense+sparse+colbert"}

    def encode_outputs(self, texts: list[str], role: str) -> M3Outputs:
        model = self.model
        dim = self._dim(model)
        if not texts:
            return M3Outputs.from_flag(
                {"dense_vecs": [], "lexical_weights": [], "colbert_vecs": []}, dim
            )
        with self._encoding(
            model, f"encoding {role} (bge_m3 dense+sparse+colbert)", role, len(texts)
        ):
            out = model.encode(
                list(texts),
                batch_size=self.cfg.batch_size,
                max_length=self.cfg.max_length,
                return_dense=True,
                return_sparse=True,
                return_colbert_vecs=True,
            )
        return M3Outputs.from_flag(out, dim)


class M3Cache:
    """`M3Outputs` of a list of texts, read from `<root>/<key[:2]>/<key>.npz` when a valid entry
    is there, else encoded and written (whole-or-nothing, under the entry's lock)."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    def paths(self, key: str) -> tuple[Path, Path, Path]:
        """(.npz, .json sidecar, .lock) for a key."""
        npz = self.root / key[:2] / f"{key}.npz"
        return npz, npz.with_suffix(".json"), lock_path_for(npz)

    def key(self, encoder: M3Encoder, texts: list[str], role: str) -> str:
        return cache_key(encoder.identity(), role, texts)

    def encode(
        self, encoder: M3Encoder, texts: list[str], role: str, key: str | None = None
    ) -> tuple[M3Outputs, CacheStats]:
        """`key`, when the caller already has `self.key(...)`, spares hashing the texts again."""
        if role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {role!r}")
        texts = list(texts)
        key = key or self.key(encoder, texts, role)
        if not texts:
            return encoder.encode_outputs(texts, role), CacheStats(0, 0, key)
        npz, sidecar, _ = self.paths(key)

        def build() -> M3Outputs:
            logger.info("encoding %d %s with BGE-M3 (not in the cache)", len(texts), role)
            outputs = encoder.encode_outputs(texts, role)
            outputs.check(len(texts))
            return outputs

        def write(outputs: M3Outputs) -> None:
            with atomic_writer(npz) as fh:
                np.savez(fh, allow_pickle=False, **outputs.arrays())
            meta = {
                "format": M3_CACHE_FORMAT,
                "key": key,
                "role": role,
                "count": len(texts),
                "identity": encoder.identity(),
                "arrays": {name: list(a.shape) for name, a in outputs.arrays().items()},
            }
            with atomic_writer(sidecar) as fh:
                fh.write(strict_dumps(meta, indent=2, sort_keys=True).encode())

        outputs, hit = read_or_build(
            self.root,
            npz,
            sidecar,
            f"the BGE-M3 cache entry of {len(texts)} {role}",
            read=lambda: self._read(npz, sidecar, key, len(texts)),
            build=build,
            write=write,
        )
        if hit:
            return outputs, CacheStats(0, len(texts), key)
        return outputs, CacheStats(len(texts), 0, key)

    @staticmethod
    def _read(npz: Path, sidecar: Path, key: str, count: int) -> M3Outputs:
        """Load an entry and check it; the zip's CRCs catch a corrupt file, the sidecar and
        `M3Outputs.check` an entry that is whole but not this one."""
        try:
            meta = json.loads(sidecar.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CacheEntryInvalid(f"sidecar is unreadable: {exc}") from exc
        expected = {"format": M3_CACHE_FORMAT, "key": key, "count": count}
        for name, value in expected.items():
            if not isinstance(meta, dict) or meta.get(name) != value:
                raise CacheEntryInvalid(f"sidecar {name} is not {value!r}")
        try:
            with np.load(npz, allow_pickle=False) as data:
                outputs = M3Outputs(**{name: data[name] for name in _ARRAYS})
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
            raise CacheEntryInvalid(f".npz does not load: {exc}") from exc
        outputs.check(count)
        return outputs
