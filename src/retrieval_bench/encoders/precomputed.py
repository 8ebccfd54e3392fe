"""`encoder=precomputed`: dense vectors a team computed elsewhere, read from files.

Passages: `encoder.path` is a `.npy` matrix (one row per passage) with `encoder.ids_path` (a
`.json` list of ids or a `.txt` with one id per line, row order), or a `.parquet` file with an
`id` column and a `vector` column (a list of floats per row; needs pyarrow). Queries: the same
shapes in `encoder.query_path` / `encoder.query_ids_path`, keyed by `query_id`.

Everything is checked before any retrieval, each refusal naming its file and counting what is
wrong: every corpus passage and every query has a vector; no id is unknown or repeated; one
dimension throughout; no NaN or infinity; and unit norms, since the dense index scores cosine
as an inner product (`encoder.normalize=true` rescales vectors whose norm is off 1 instead of
refusing them, keeping unit ones bit for bit; a zero vector is always refused). Nothing is
cached: the files are the vectors.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from retrieval_bench.config.encoder import EncoderConfig
from retrieval_bench.encoders.checked import UNIT_NORM_TOLERANCE, row_norms
from retrieval_bench.errors import ConfigError, DataError

ALREADY_UNIT = 1e-6
"""Rows this close to norm 1 (float32 rounding) are kept as given, bit for bit, when
normalising: rescaling them would only move their last bits, and the vectors an encoder of this
project wrote must rank exactly as they did in that encoder's job."""
_SHOWN = 3


@dataclass(frozen=True)
class VectorTable:
    """Ids and their vectors (float32, one row per id, in file order), and where they came from."""

    ids: list[str]
    vectors: np.ndarray
    source: str


@dataclass(frozen=True)
class PrecomputedVectors:
    """Passage vectors in corpus order and query vectors by query text, validated."""

    passages: np.ndarray
    by_query_text: dict[str, np.ndarray]
    key: str

    # Not an encoder: the dense arm loads these files (load_precomputed) instead of encoding.
    precomputed: ClassVar[bool] = True

    @classmethod
    def check_config(cls, cfg: EncoderConfig) -> None:
        """The files must be named; they are not encoded, so not sharded or half-precision."""
        if not cfg.path.strip():
            raise ConfigError(
                "encoder.path",
                "encoder=precomputed needs the passage vectors: encoder.path=FILE.npy "
                "(with encoder.ids_path=IDS.json|.txt) or encoder.path=FILE.parquet",
            )
        if cfg.shards != 1 or cfg.shard_only is not None or cfg.require_shards:
            raise ConfigError(
                "encoder.shards",
                "precomputed vectors are not encoded, so not sharded: leave encoder.shards, "
                "shard_only and require_shards unset",
            )
        if cfg.precision != "fp32":
            raise ConfigError(
                "encoder.precision",
                "precomputed vectors are read as float32; set encoder.precision=fp32",
            )

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        """The dense arm's query encoder: a lookup, since every query was given a vector."""
        missing = [t for t in texts if t not in self.by_query_text]
        if missing:  # the pipeline searches the evaluation set's own query texts
            raise KeyError(f"no precomputed vector for query text {missing[0]!r}")
        dim = self.passages.shape[1]
        if not texts:
            return np.zeros((0, dim), dtype=np.float32)
        return np.vstack([self.by_query_text[t] for t in texts])


def _first(items: Sequence[str]) -> str:
    shown = ", ".join(repr(i) for i in items[:_SHOWN])
    return shown + (f" and {len(items) - _SHOWN} more" if len(items) > _SHOWN else "")


def read_ids(path: Path, key: str) -> list[str]:
    """Ids from a `.json` list of strings or a `.txt` file with one id per line."""
    if not path.is_file():
        raise ConfigError(key, f"no ids file at {path}")
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        try:
            ids = json.loads(text)
        except ValueError as exc:
            raise DataError(path, f"not valid JSON ({exc})") from exc
        if not isinstance(ids, list) or not all(isinstance(i, str) and i for i in ids):
            raise DataError(path, "must hold a JSON list of non-empty id strings")
        return ids
    if path.suffix == ".txt":
        ids = text.split("\n")
        if ids and ids[-1] == "":
            ids.pop()  # the final newline
        for line, value in enumerate(ids, 1):
            if not value.strip() or value != value.strip():
                raise DataError(path, f"id {value!r} is empty or has surrounding spaces", line)
        return ids
    raise ConfigError(key, f"{path}: ids must be a .json list or a .txt file, one id per line")


def _parquet(path: Path, key: str) -> tuple[list[str], np.ndarray]:
    try:
        import pyarrow.compute as pc
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ConfigError(
            key,
            f"{path} is parquet, which needs pyarrow: pip install pyarrow "
            "(or give the vectors as .npy with an ids file)",
        ) from exc
    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises its own error types for a bad file
        raise DataError(path, f"not a readable parquet file ({exc})") from exc
    for column in ("id", "vector"):
        if column not in table.column_names:
            raise DataError(path, f"no {column!r} column (it has {', '.join(table.column_names)})")
    ids = [str(i) for i in table.column("id").to_pylist()]
    column = table.column("vector").combine_chunks()
    try:
        lengths = pc.list_value_length(column).to_numpy(zero_copy_only=False)
        values = column.flatten().to_numpy(zero_copy_only=False)
    except Exception as exc:
        raise DataError(path, f"column 'vector' is not a list of numbers ({exc})") from exc
    if column.null_count:
        raise DataError(path, f"{column.null_count} rows have no vector")
    if len(lengths) and (lengths != lengths[0]).any():
        bad = int(np.flatnonzero(lengths != lengths[0])[0])
        raise DataError(
            path,
            f"vectors of different dimensions: id {ids[0]!r} has {lengths[0]}, "
            f"id {ids[bad]!r} has {lengths[bad]}",
        )
    dim = int(lengths[0]) if len(lengths) else 0
    return ids, np.asarray(values, dtype=np.float64).reshape(len(ids), dim)


def read_vectors(path_value: str, ids_value: str, key: str, ids_key: str) -> VectorTable:
    """A vector file and its ids, with the shape checks that need no corpus."""
    path = Path(path_value).expanduser()
    if not path.is_file():
        raise ConfigError(key, f"no vector file at {path}")
    if path.suffix == ".parquet":
        ids, raw = _parquet(path, key)
    elif path.suffix == ".npy":
        if not ids_value:
            raise ConfigError(
                ids_key, f"{path} holds no ids: give them with {ids_key}=IDS.json|IDS.txt"
            )
        try:
            raw = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise DataError(path, f"not a loadable .npy matrix ({exc})") from exc
        if raw.ndim != 2:
            raise DataError(path, f"must be a 2-D matrix (one row per id), got shape {raw.shape}")
        if not np.issubdtype(raw.dtype, np.floating):
            raise DataError(path, f"must hold floats, got {raw.dtype}")
        ids = read_ids(Path(ids_value).expanduser(), ids_key)
        if len(ids) != raw.shape[0]:
            raise DataError(
                path, f"{raw.shape[0]} rows but {len(ids)} ids in {ids_value}: one id per row"
            )
    else:
        raise ConfigError(key, f"{path}: vectors must be a .npy (with ids) or a .parquet file")
    repeated = [i for i, n in Counter(ids).items() if n > 1]
    if repeated:
        raise DataError(path, f"{len(repeated)} ids appear more than once: {_first(repeated)}")
    if raw.shape[1] == 0:
        raise DataError(path, "vectors have dimension 0")
    bad = ~np.isfinite(raw).all(axis=1)
    if bad.any():
        rows = [ids[i] for i in np.flatnonzero(bad)]
        raise DataError(path, f"{len(rows)} vectors hold NaN or infinity: ids {_first(rows)}")
    return VectorTable(ids, raw.astype(np.float32, copy=False), str(path))  # no copy if float32


def _unit(table: VectorTable, normalize: bool) -> np.ndarray:
    """Unit-norm rows, normalised or refused as `encoder.normalize` says."""
    vectors = table.vectors
    norms = row_norms(vectors)
    zero = norms == 0
    if zero.any():
        rows = [table.ids[i] for i in np.flatnonzero(zero)]
        raise DataError(
            table.source, f"{len(rows)} vectors are all zeros (no direction): {_first(rows)}"
        )
    off = np.abs(norms - 1) > UNIT_NORM_TOLERANCE
    if off.any() and not normalize:
        rows = [f"{table.ids[i]} ({norms[i]:.4g})" for i in np.flatnonzero(off)]
        raise DataError(
            table.source,
            f"{len(rows)} vectors are not unit-norm (cosine needs unit vectors): "
            f"{_first(rows)}; set encoder.normalize=true to normalise them",
        )
    rescale = np.abs(norms - 1) > ALREADY_UNIT
    if normalize and rescale.any():
        vectors = vectors.copy()
        vectors[rescale] = (vectors[rescale] / norms[rescale, None]).astype(np.float32)
    return np.ascontiguousarray(vectors, dtype=np.float32)


def _align(table: VectorTable, wanted: Sequence[str], what: str) -> np.ndarray:
    """The rows of `wanted` ids in that order; refuses missing and unknown ids, counted."""
    row = {i: n for n, i in enumerate(table.ids)}
    missing = [i for i in wanted if i not in row]
    if missing:
        raise DataError(
            table.source, f"{len(missing)} {what} have no vector here: {_first(missing)}"
        )
    known = set(wanted)
    unknown = [i for i in table.ids if i not in known]
    if unknown:
        raise DataError(
            table.source,
            f"{len(unknown)} ids are not {what} of this dataset: {_first(unknown)}",
        )
    if table.ids == list(wanted):  # already in corpus order: no copy of the matrix
        return table.vectors
    return table.vectors[[row[i] for i in wanted]]


def load_precomputed(
    cfg: EncoderConfig, passage_ids: Sequence[str], queries: Sequence[tuple[str, str]]
) -> PrecomputedVectors:
    """Passage and query vectors for this dataset (`queries`: (query_id, text) pairs)."""
    if not cfg.query_path.strip():
        raise ConfigError(
            "encoder.query_path",
            "encoder=precomputed needs query vectors too, keyed by query_id: "
            "encoder.query_path=FILE.npy with encoder.query_ids_path=IDS.json|.txt, or "
            "encoder.query_path=FILE.parquet (id = query_id)",
        )
    passages = read_vectors(cfg.path, cfg.ids_path, "encoder.path", "encoder.ids_path")
    passage_matrix = _align(passages, passage_ids, "corpus passages")
    query_table = read_vectors(
        cfg.query_path, cfg.query_ids_path, "encoder.query_path", "encoder.query_ids_path"
    )
    if query_table.vectors.shape[1] != passage_matrix.shape[1]:
        raise DataError(
            query_table.source,
            f"query vectors have dimension {query_table.vectors.shape[1]}, passage vectors "
            f"{passage_matrix.shape[1]} ({passages.source})",
        )
    unique_ids = list(dict.fromkeys(qid for qid, _ in queries))
    query_matrix = _align(query_table, unique_ids, "query ids")
    passage_table = VectorTable(list(passage_ids), passage_matrix, passages.source)
    passage_matrix = _unit(passage_table, cfg.normalize)
    query_matrix = _unit(VectorTable(unique_ids, query_matrix, query_table.source), cfg.normalize)
    by_id = dict(zip(unique_ids, query_matrix, strict=True))
    by_text: dict[str, np.ndarray] = {}
    for qid, text in queries:
        vector = by_id[qid]
        if text in by_text and not np.array_equal(by_text[text], vector):
            raise DataError(
                query_table.source,
                f"two queries with the same text {text!r} have different vectors (one is "
                f"{qid!r}); the dense arm looks vectors up by query text",
            )
        by_text[text] = vector
    digest = hashlib.sha256(b"retrieval_bench.precomputed/v1")
    digest.update(passage_matrix.data.cast("B"))  # its bytes, without a copy (C order)
    return PrecomputedVectors(passage_matrix, by_text, digest.hexdigest())
