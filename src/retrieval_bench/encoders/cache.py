"""On-disk cache of encoded texts, so a sweep never encodes the same corpus twice.

Layout: `<root>/<key[:2]>/<key>.npy` (the float32 matrix) and `<key>.json` (its sidecar: shape,
dtype, sha256 of the .npy bytes, encoder identity, role, count). Plain arrays and JSON, never
pickles, so a cache file cannot run code and any tool can read it.

The key is a sha256 over the encoder identity, the role and the texts (each length-prefixed,
so `["ab", "c"]` and `["a", "bc"]` differ). Hydra multirun jobs may share the cache at the same
time, so:

* every file is written to a temp file in its folder, fsynced, then `os.replace`d: a reader
  sees the old file or the new one, never half of one; the sidecar goes last, so a sidecar
  always describes a complete .npy;
* encoding and writing happen under an exclusive `fcntl` lock on `<key>.lock`: a second job
  that wants the same key waits, then reads what the first one wrote instead of encoding again;
* a read checks the sidecar against the file (checksum, shape, dtype, count); a truncated,
  corrupt or unmatched entry is logged as a warning and rebuilt.

Every encoder is called through the encoder boundary (`encoders.checked`), and a cached entry's
vectors are checked by the same rules before they are handed on: an entry an earlier, buggy
encoder wrote (NaN, not unit-norm) is logged and encoded again, and if the encoder still gives
such vectors, the job stops naming it (exit 2), as it would have when the entry was written.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import numpy as np

from retrieval_bench.encoders.checked import CheckedEncoder, EncoderOutputError, checked
from retrieval_bench.io.atomic import atomic_writer
from retrieval_bench.io.hashing import update_len_prefixed, update_texts
from retrieval_bench.io.locks import file_lock, lock_path_for, remove_stale_temps
from retrieval_bench.io.strict_json import strict_dumps
from retrieval_bench.protocols import Encoder

logger = logging.getLogger(__name__)
T = TypeVar("T")

ROLES: tuple[str, ...] = ("passages", "queries")
CACHE_FORMAT = 1
_HASH_CHUNK = 1 << 22


@dataclass(frozen=True)
class CacheStats:
    """How many texts were encoded now versus read from the cache (for the run manifest);
    `cold_seconds`: how long encoding them took (measured now, or when the cache entry was
    written; None for an entry written before it was recorded); `disk_bytes`: the entry's
    files."""

    encoded: int = 0
    cached: int = 0
    key: str = ""
    cold_seconds: float | None = None
    disk_bytes: int = 0

    def __add__(self, other: CacheStats) -> CacheStats:
        cold = (
            None
            if self.cold_seconds is None or other.cold_seconds is None
            else self.cold_seconds + other.cold_seconds
        )
        return CacheStats(
            self.encoded + other.encoded,
            self.cached + other.cached,
            "",
            cold,
            self.disk_bytes + other.disk_bytes,
        )


def cache_key(identity: dict[str, Any], role: str, texts: list[str]) -> str:
    """sha256 over encoder identity (sorted-key JSON), role and texts, each length-prefixed."""
    digest = hashlib.sha256()
    update_len_prefixed(digest, f"retrieval_bench.encoders.cache/v{CACHE_FORMAT}".encode())
    ident = json.dumps(identity, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    update_len_prefixed(digest, ident.encode())
    update_len_prefixed(digest, role.encode())
    update_texts(digest, texts)
    return digest.hexdigest()


class CacheEntryInvalid(Exception):
    """A cache entry exists but cannot be trusted; the message says why."""


def read_or_build(
    root: Path,
    data: Path,
    sidecar: Path,
    what: str,
    *,
    read: Callable[[], T],
    build: Callable[[], T],
    write: Callable[[T], object],
) -> tuple[T, bool]:
    """A cache entry (`data` plus its `sidecar`, written last) read when valid, else built and
    written under the entry's lock; returns (value, True when read). The discipline every
    content-keyed cache here shares (module doc): `read` raises CacheEntryInvalid for an entry
    it cannot trust, `write` replaces each file atomically, the sidecar last."""
    # Fast path without the lock: files only ever appear whole (os.replace), so a valid entry
    # can be read while another job works on a different key.
    if sidecar.exists():
        with contextlib.suppress(CacheEntryInvalid):
            return read(), True
    data.parent.mkdir(parents=True, exist_ok=True)
    lock = lock_path_for(data)
    with file_lock(lock, what):
        remove_stale_temps(root, lock)  # left by writers killed mid-write
        # Another job may have written it while this one waited for the lock.
        if data.exists() or sidecar.exists():
            try:
                return read(), True
            except CacheEntryInvalid as exc:
                logger.warning("cache entry %s is invalid (%s); rebuilding it", data, exc)
        value = build()
        # Any previous sidecar describes the previous data file; drop it before replacing that.
        sidecar.unlink(missing_ok=True)
        write(value)
        return value, False


class EmbeddingCache:
    """Encodes through a content-keyed on-disk cache that concurrent jobs can share safely."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    # -- paths --------------------------------------------------------------------------------
    def paths(self, key: str) -> tuple[Path, Path, Path]:
        """(.npy, .json sidecar, .lock) for a key."""
        npy = self.root / key[:2] / f"{key}.npy"
        return npy, npy.with_suffix(".json"), lock_path_for(npy)

    # -- public -------------------------------------------------------------------------------
    def encode(
        self, encoder: Encoder, texts: list[str], role: str
    ) -> tuple[np.ndarray, CacheStats]:
        """The vectors for `texts`, from the cache when a valid entry exists, else encoded now;
        either way checked at the encoder boundary (module doc). A raw encoder is taken
        through it with unit vectors expected, as its protocol says."""
        if role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {role!r}")
        encoder = checked(encoder)
        texts = list(texts)
        identity = encoder.identity()
        key = cache_key(identity, role, texts)
        if not texts:
            return self._run_encoder(encoder, texts, role), CacheStats(0, 0, key)
        npy, sidecar, _ = self.paths(key)
        took: list[float] = []

        def build() -> np.ndarray:
            logger.info("encoding %d %s (not in the embedding cache)", len(texts), role)
            start = time.perf_counter()
            built = self._run_encoder(encoder, texts, role)
            took.append(time.perf_counter() - start)
            return built

        array, hit = read_or_build(
            self.root,
            npy,
            sidecar,
            f"the embedding cache entry of {len(texts)} {role}",
            read=lambda: _checked(
                encoder, self._read(npy, sidecar, key, role, len(texts)), texts, role
            ),
            build=build,
            write=lambda built: self._write(npy, sidecar, built, key, identity, role, took),
        )
        logger.debug("embedding cache %s: %s %s", "hit" if hit else "wrote", array.shape, npy)
        size = _size(npy) + _size(sidecar)
        if hit:
            cold = _encode_seconds(sidecar)
            return array, CacheStats(0, len(texts), key, cold, size)
        return array, CacheStats(len(texts), 0, key, took[0], size)

    def lookup(self, encoder: Encoder, texts: list[str], role: str) -> np.ndarray | None:
        """The cached vectors for `texts`, or None when no valid entry exists (one whose vectors
        the encoder boundary refuses included); never encodes (and so never loads a model: the
        identity of a FlagEmbedding encoder is a file walk)."""
        encoder = checked(encoder)
        texts = list(texts)
        key = cache_key(encoder.identity(), role, texts)
        npy, sidecar, _ = self.paths(key)
        try:
            return _checked(encoder, self._read(npy, sidecar, key, role, len(texts)), texts, role)
        except CacheEntryInvalid:
            return None

    # -- internals ----------------------------------------------------------------------------
    @staticmethod
    def _run_encoder(encoder: CheckedEncoder, texts: list[str], role: str) -> np.ndarray:
        """The encoder's vectors, checked at its boundary (a float32 matrix, one row a text)."""
        encode = encoder.encode_queries if role == "queries" else encoder.encode_passages
        return encode(texts)

    @staticmethod
    def _read(npy: Path, sidecar: Path, key: str, role: str, count: int) -> np.ndarray:
        """Load an entry and check it against its sidecar; CacheEntryInvalid says what is wrong."""
        try:
            meta = json.loads(sidecar.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise CacheEntryInvalid("sidecar .json is missing") from exc
        except (OSError, ValueError) as exc:
            raise CacheEntryInvalid(f"sidecar is unreadable: {exc}") from exc
        if not isinstance(meta, dict):
            raise CacheEntryInvalid("sidecar is not a JSON object")
        expected = {"format": CACHE_FORMAT, "key": key, "role": role, "count": count}
        for field, value in expected.items():
            if meta.get(field) != value:
                raise CacheEntryInvalid(f"sidecar {field}={meta.get(field)!r}, expected {value!r}")
        try:
            fh = npy.open("rb")
        except FileNotFoundError as exc:
            raise CacheEntryInvalid(".npy file is missing") from exc
        with fh:
            # Hash and load through one handle: a concurrent os.replace cannot swap the file
            # between the checksum and the load.
            digest = hashlib.sha256()
            for block in iter(lambda: fh.read(_HASH_CHUNK), b""):
                digest.update(block)
            if digest.hexdigest() != meta.get("sha256"):
                raise CacheEntryInvalid("sha256 of the .npy does not match the sidecar")
            fh.seek(0)
            try:
                array = np.load(fh, allow_pickle=False)
            except (OSError, ValueError, EOFError) as exc:
                raise CacheEntryInvalid(f".npy does not load: {exc}") from exc
        if list(array.shape) != meta.get("shape") or array.ndim != 2 or array.shape[0] != count:
            raise CacheEntryInvalid(
                f"shape {array.shape} does not match sidecar {meta.get('shape')} / {count} texts"
            )
        if str(array.dtype) != meta.get("dtype") or array.dtype != np.float32:
            raise CacheEntryInvalid(f"dtype {array.dtype} does not match sidecar")
        return array

    @staticmethod
    def _write(
        npy: Path,
        sidecar: Path,
        array: np.ndarray,
        key: str,
        identity: dict[str, Any],
        role: str,
        took: Sequence[float] = (),
    ) -> None:
        sha256 = _atomic_write(npy, lambda fh: np.save(fh, array, allow_pickle=False))
        meta = {
            "format": CACHE_FORMAT,
            "key": key,
            "shape": list(array.shape),
            "dtype": str(array.dtype),
            "sha256": sha256,
            "identity": identity,
            "role": role,
            "count": int(array.shape[0]),
            # How long encoding took, so a job reading the entry can state its cold cost.
            "encode_s": round(took[0], 4) if took else None,
        }
        text = strict_dumps(meta, indent=2, sort_keys=True).encode()
        _atomic_write(sidecar, lambda fh: fh.write(text))


def _checked(encoder: CheckedEncoder, array: np.ndarray, texts: list[str], role: str) -> np.ndarray:
    """A cached entry's vectors through the encoder boundary's check; refused ones make the
    entry invalid (so it is encoded again, and the fresh vectors checked in turn)."""
    try:
        return encoder.check(array, texts, role)
    except EncoderOutputError as exc:
        raise CacheEntryInvalid(f"its vectors are refused: {exc}") from exc


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _encode_seconds(sidecar: Path) -> float | None:
    """The encode time an entry's sidecar recorded (None: written before it was recorded)."""
    try:
        value = json.loads(sidecar.read_text(encoding="utf-8")).get("encode_s")
    except (OSError, ValueError, AttributeError):
        return None
    return float(value) if isinstance(value, (int, float)) else None


class _HashingWriter:
    """File-like that hashes what passes through, so the .npy is written and hashed in one pass
    (np.save streams through `write` for non-file objects, without a full in-memory copy)."""

    def __init__(self, fh: BinaryIO) -> None:
        self._fh = fh
        self.sha256 = hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.sha256.update(data)
        return self._fh.write(data)


def _atomic_write(path: Path, write: Callable[[_HashingWriter], object]) -> str:
    """Write whole-or-nothing (`atomic_writer`); returns the sha256 of what was written."""
    with atomic_writer(path) as fh:
        writer = _HashingWriter(fh)
        write(writer)
    return writer.sha256.hexdigest()
