"""FlagEmbedding encoders: BGE-M3 dense vectors and any other encoder-only FlagEmbedding model.

Three constraints shape this module:

* Offline by default. A benchmark host usually has no route to the Hugging Face hub, and a
  hub lookup that hangs for a minute per retry before failing wastes a sweep. So `model` is
  resolved to a directory *before* anything is loaded: an existing local directory is used as
  is; a hub id is looked up in the local HF cache only (`local_files_only`) unless
  `allow_download`, and a miss raises `EncoderUnavailable` at once, naming the ways out. The
  load itself then runs with the hub switched to offline mode, from that directory.
* Lazy, once per process. Building an encoder is free; the model loads on the first encode
  (so a run whose embeddings are all cached never loads it), and a per-process memo keyed on
  what the loaded object depends on lets the jobs of a Hydra multirun share one copy.
* torch / transformers / FlagEmbedding are imported only here and only when needed, so the
  base install (without the `flag` extra) works with the USE encoder.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import logging
import os
import re
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from retrieval_bench.config.encoder import DEFAULT_BGE_M3_MODEL, EncoderConfig, check_devices
from retrieval_bench.errors import ConfigError, EncoderUnavailable
from retrieval_bench.progress import progress

logger = logging.getLogger(__name__)

_HUB_ID_RE = re.compile(r"^([A-Za-z0-9][\w.\-]*/)?[A-Za-z0-9][\w.\-]*$")
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
_FINGERPRINT_FULL_BYTES = 1 << 20
_M3_HEADS = ("colbert_linear.pt", "sparse_linear.pt")
_MAX_LOADED_MODELS = 2
"""Loaded models kept per process: enough for a sweep that alternates two models, small enough
that a sweep over many models does not hold them all in memory."""


@dataclass(frozen=True)
class ModelRole:
    """Which config node a model belongs to, for the messages that name the ways out: the
    node's key (`encoder`, `reranker`) and what to run instead when no model is at hand."""

    key: str
    fallback: str


ENCODER_ROLE = ModelRole("encoder", "use the offline encoder with encoder=use")


@dataclass(frozen=True)
class ResolvedModel:
    """Where a configured model lives on disk, and a fingerprint of its files."""

    name: str
    path: Path
    fingerprint: str


# Model types whose position ids start after the padding id (`padding_idx + 1`, RoBERTa's
# convention): their `max_position_embeddings` holds pad_token_id + 1 slots no token uses.
_PADDING_OFFSET_TYPES = frozenset(
    {"roberta", "xlm-roberta", "xlm-roberta-xl", "camembert", "longformer", "mpnet",
     "data2vec-text", "markuplm", "ibert"}
)  # fmt: skip
# A tokenizer's model_max_length this large means "not set" (transformers' VERY_LARGE_INTEGER).
_UNSET_LENGTH = 10**9


def model_token_limit(folder: Path) -> int | None:
    """The most tokens one input to the model in `folder` may hold, read from its files: the
    positions its embeddings have (`config.json`'s `max_position_embeddings`, less the
    padding offset of RoBERTa-like models), and its tokenizer's `model_max_length` where that is
    lower. None when the files do not say (the model then takes what it is given)."""
    limits = []
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        config = {}
    positions = config.get("max_position_embeddings") if isinstance(config, dict) else None
    if isinstance(positions, int) and positions > 0:
        offset = 0
        if config.get("model_type") in _PADDING_OFFSET_TYPES:
            offset = int(config.get("pad_token_id") or 1) + 1
        limits.append(positions - offset)
    try:
        tokenizer = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        tokenizer = {}
    length = tokenizer.get("model_max_length") if isinstance(tokenizer, dict) else None
    if isinstance(length, (int, float)) and 0 < length < _UNSET_LENGTH:
        limits.append(int(length))
    return min(limits) if limits else None


def hub_cache_dir() -> Path:
    """The HF hub cache, read from the environment now (huggingface_hub reads it at import)."""
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        value = os.environ.get(var)
        if value:
            return Path(os.path.expandvars(os.path.expanduser(value)))
    home = os.environ.get("HF_HOME")
    if not home:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        home = os.path.join(xdg, "huggingface")
    return Path(os.path.expandvars(os.path.expanduser(home))) / "hub"


def _looks_like_path(model: str) -> bool:
    """A value the user meant as a path: a hub id is `org/name` (or a bare legacy `name`)."""
    return os.path.isabs(model) or model.startswith((".", "~")) or not _HUB_ID_RE.match(model)


def unavailable_message(
    model: str, reason: str, allow_download: bool = False, role: ModelRole = ENCODER_ROLE
) -> str:
    """One message for every way a model can be missing, with the ways out."""
    name = model.rstrip("/\\").replace("\\", "/").split("/")[-1] or "model"
    message = (
        f"{role.key} model {model!r} cannot be loaded: {reason}. "
        f"Set {role.key}.model=/local/path/to/{name} to a downloaded copy of the model, "
        f"or {role.fallback}"
    )
    if allow_download or not _HUB_ID_RE.match(model):
        return message + "."
    return message + (
        f" (or {role.key}.allow_download=true to download it, where the Hugging Face hub is "
        "reachable)."
    )


def _check_model_dir(model: str, path: Path, role: ModelRole = ENCODER_ROLE) -> None:
    """Fail early, with the path, on a directory that cannot be a transformers model."""
    if not (path / "config.json").is_file():
        raise EncoderUnavailable(
            unavailable_message(
                model, f"{path} is not a loadable model (no config.json)", role=role
            )
        )
    has_weights = any(
        p.is_file() and p.name.endswith(_WEIGHT_SUFFIXES) and p.name not in _M3_HEADS
        for p in path.iterdir()
    )
    if not has_weights:
        raise EncoderUnavailable(
            unavailable_message(
                model,
                f"{path} is not a loadable model (no *.safetensors or *.bin weights)",
                role=role,
            )
        )


def fingerprint_dir(path: Path) -> str:
    """A cheap content fingerprint of a model directory, so cached vectors follow the weights.

    Small files (configs, vocabularies) are hashed whole; large ones by size plus their first
    and last MiB, which is enough to notice a replaced checkpoint without reading gigabytes.
    The directory's own location is left out, so a copy elsewhere keys the same.
    """
    digest = hashlib.sha256()
    files: list[tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(path, followlinks=True):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for filename in filenames:
            if not filename.startswith("."):
                full = Path(dirpath) / filename
                files.append((full.relative_to(path).as_posix(), full))
    for rel, full in sorted(files):
        size = full.stat().st_size
        digest.update(f"{rel}\0{size}\0".encode())
        with full.open("rb") as fh:
            if size <= 2 * _FINGERPRINT_FULL_BYTES:
                digest.update(fh.read())
            else:
                digest.update(fh.read(_FINGERPRINT_FULL_BYTES))
                fh.seek(size - _FINGERPRINT_FULL_BYTES)
                digest.update(fh.read(_FINGERPRINT_FULL_BYTES))
    return digest.hexdigest()


def resolve_model(
    model: str, allow_download: bool, role: ModelRole = ENCODER_ROLE
) -> ResolvedModel:
    """Find the model's directory without touching the network unless `allow_download`."""
    expanded = Path(os.path.expanduser(model))
    if expanded.is_dir():
        path = expanded.resolve()
        _check_model_dir(model, path, role)
        return ResolvedModel(name=path.name, path=path, fingerprint=fingerprint_dir(path))
    if expanded.exists():
        raise EncoderUnavailable(
            unavailable_message(model, f"{expanded} is a file, not a model directory", role=role)
        )
    if _looks_like_path(model):
        raise EncoderUnavailable(
            unavailable_message(model, f"no directory at {expanded.absolute()}", role=role)
        )

    try:
        from huggingface_hub import snapshot_download
    except ImportError as exc:
        raise EncoderUnavailable(_missing_extra_message(exc, role)) from exc
    cache = hub_cache_dir()
    try:
        if allow_download:
            logger.info("resolving %s on the Hugging Face hub (allow_download=true)", model)
            found = snapshot_download(
                repo_id=model,
                cache_dir=str(cache),
                ignore_patterns=["flax_model.msgpack", "rust_model.ot", "tf_model.h5", "onnx/*"],
            )
        else:
            found = snapshot_download(repo_id=model, cache_dir=str(cache), local_files_only=True)
    except Exception as exc:
        if allow_download:
            reason = f"download from the Hugging Face hub failed ({type(exc).__name__}: {exc})"
        else:
            reason = (
                f"it is not a local directory and not in the local Hugging Face cache ({cache}), "
                f"and downloads are off ({role.key}.allow_download=false)"
            )
        raise EncoderUnavailable(unavailable_message(model, reason, allow_download, role)) from exc
    path = Path(found).resolve()
    _check_model_dir(model, path, role)
    return ResolvedModel(name=model, path=path, fingerprint=fingerprint_dir(path))


def _missing_extra_message(exc: BaseException, role: ModelRole = ENCODER_ROLE) -> str:
    return (
        f"FlagEmbedding {role.key}s need the 'flag' extra "
        f"(pip install 'retrieval-bench[flag]'): {exc}. Or {role.fallback}."
    )


@contextlib.contextmanager
def _hub_offline() -> Iterator[None]:
    """Hold the HF hub in offline mode while loading, then put the previous mode back.

    Loading is from a local directory anyway; this makes sure nothing inside transformers
    reaches out (e.g. to look up a tokenizer's hub metadata). huggingface_hub reads its flag
    at import, so the module constant is switched along with the environment.
    """
    saved_env = {k: os.environ.get(k) for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    constants: Any = None
    saved_flag = None
    try:
        import huggingface_hub.constants as constants

        saved_flag = constants.HF_HUB_OFFLINE
        constants.HF_HUB_OFFLINE = True
    except ImportError:  # pragma: no cover - transformers depends on it
        pass
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    try:
        yield
    finally:
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if constants is not None:
            constants.HF_HUB_OFFLINE = saved_flag


def _flag_version() -> str:
    try:
        return metadata.version("FlagEmbedding")
    except metadata.PackageNotFoundError:
        return "missing"


@contextlib.contextmanager
def batches_reported(model: Any, desc: str, unit: str, total: int) -> Iterator[None]:
    """Report FlagEmbedding's batch loop through progress.py while `model` encodes.

    FlagEmbedding sorts the texts by length and loops over batches inside one `encode` call,
    under a tqdm bar of its own (a carriage-return line when stderr is not a terminal). Cutting
    the texts into several calls would cost more padding and one extra trial batch per call,
    so instead the `tqdm` that its encoding modules imported is swapped, for the call, for one
    that counts texts through `progress` (its `trange` over the tokeniser pass goes quiet). A
    FlagEmbedding without those names keeps its own bar.
    """

    def batches(starts: range, *args: Any, **kwargs: Any) -> Iterator[int]:
        with progress(desc, total, unit) as bar:
            for start in starts:
                yield start
                bar.update(min(starts.step, starts.stop - start))

    def quiet_range(*args: Any, **kwargs: Any) -> range:
        return range(*args)

    swapped: list[tuple[Any, dict[str, Any]]] = []
    for module in {sys.modules.get(cls.__module__) for cls in type(model).__mro__}:
        if module is not None and hasattr(module, "tqdm") and hasattr(module, "trange"):
            swapped.append((module, {"tqdm": module.tqdm, "trange": module.trange}))
            vars(module).update(tqdm=batches, trange=quiet_range)
    try:
        yield
    finally:
        for module, originals in swapped:
            vars(module).update(originals)


_LOAD_LOCK = threading.Lock()
_LOADED: OrderedDict[tuple[Any, ...], Any] = OrderedDict()


def clear_loaded_models() -> None:
    """Drop the per-process model memo (frees memory between unrelated sweeps, and for tests)."""
    with _LOAD_LOCK:
        for model in _LOADED.values():
            _stop_pool(model)
        _LOADED.clear()


def load_shared(key: tuple[Any, ...], load: Callable[[], Any]) -> Any:
    """The model loaded under `key` (what the loaded object depends on), loading it with
    `load` on first use: the jobs of a multirun share one copy, and at most
    `_MAX_LOADED_MODELS` (encoders and rerankers together) stay in memory."""
    with _LOAD_LOCK:
        loaded = _LOADED.get(key)
        if loaded is not None:
            _LOADED.move_to_end(key)
            return loaded
        loaded = load()
        _LOADED[key] = loaded
        while len(_LOADED) > _MAX_LOADED_MODELS:
            _stop_pool(_LOADED.popitem(last=False)[1])
        return loaded


def load_offline(
    model_id: str,
    resolved: ResolvedModel,
    kind: str,
    allow_download: bool,
    role: ModelRole,
    load: Callable[[], Any],
) -> Any:
    """Run `load` (a FlagEmbedding constructor over `resolved.path`) with the hub offline; any
    failure becomes EncoderUnavailable naming the path and the ways out."""
    try:
        import FlagEmbedding  # noqa: F401  (fail with the extra's name, not a deep import)
    except ImportError as exc:
        raise EncoderUnavailable(_missing_extra_message(exc, role)) from exc
    logger.debug("loading %s from %s", resolved.name, resolved.path)
    try:
        with _hub_offline():
            return load()
    except EncoderUnavailable:
        raise
    except Exception as exc:
        reason = f"{resolved.path} is not a loadable {kind} model ({type(exc).__name__}: {exc})"
        message = unavailable_message(model_id, reason, allow_download, role)
        raise EncoderUnavailable(message) from exc


def _stop_pool(model: Any) -> None:
    """End a model's device worker processes (encoder.devices with several entries).

    Done here, while the interpreter is whole: FlagEmbedding otherwise stops them in `__del__`,
    which at exit runs after the modules it needs are gone and prints a traceback.
    """
    pool = getattr(model, "pool", None)
    if pool is not None:
        model.pool = None
        model.stop_multi_process_pool(pool)


atexit.register(clear_loaded_models)


def pool_worker(device: str, model: Any, inputs: Any, outputs: Any) -> None:
    """FlagEmbedding's own pool worker, with torch's threads shared out among the CPU workers.

    With `encoder.devices=[cpu, cpu]` each worker process would otherwise start one thread per
    core, and two workers on two cores would fight over them. GPU workers keep torch's default.
    """
    from FlagEmbedding.abc.inference.AbsEmbedder import AbsEmbedder

    if device == "cpu":
        import torch

        cpu_workers = sum(1 for d in model.target_devices if d == "cpu")
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
        torch.set_num_threads(max(1, (cores or os.cpu_count() or 1) // cpu_workers))
    AbsEmbedder._encode_multi_process_worker(device, model, inputs, outputs)


class _FlagEncoderBase:
    """Shared resolution, identity, memo and post-processing for both FlagEmbedding kinds."""

    kind: str = ""
    # The config node the model comes from, named by every missing-model message.
    role: ModelRole = ENCODER_ROLE

    def __init__(self, cfg: EncoderConfig) -> None:
        self.cfg = cfg
        self.model_id = self.model_of(cfg)
        self._resolved: ResolvedModel | None = None

    @classmethod
    def model_of(cls, cfg: EncoderConfig) -> str:
        """The model to load: `encoder.model`."""
        return cfg.model.strip()

    @classmethod
    def check_config(cls, cfg: EncoderConfig) -> None:
        """What a FlagEmbedding model needs before it loads: a model named, and the devices
        (and a half precision's GPUs) present on this machine."""
        if not cls.model_of(cfg):
            raise ConfigError(
                "encoder.model",
                f"the {cls.kind} encoder needs a model: a local directory or a hub id "
                "(e.g. encoder.model=/models/bge-small-zh-v1.5)",
            )
        check_devices("encoder.devices", cfg.devices, present=True)

    # -- resolution and identity ------------------------------------------------------------
    def resolve(self) -> ResolvedModel:
        """Locate the model on disk (memoised); raises EncoderUnavailable when it is not there."""
        if self._resolved is None:
            self._resolved = resolve_model(self.model_id, self.cfg.allow_download, self.role)
        return self._resolved

    def _pooling(self) -> str:
        return self.cfg.pooling

    def identity(self) -> dict[str, Any]:
        """Model name plus a fingerprint of its files, and every setting that moves the vectors.

        Resolving here (a stat walk, no model load) means a missing model fails as soon as the
        embedding cache asks for a key, and a replaced checkpoint never reuses old vectors.
        """
        resolved = self.resolve()
        return {
            "kind": self.kind,
            "model": resolved.name,
            "weights": resolved.fingerprint,
            "pooling": self._pooling(),
            "max_length": self.cfg.max_length,
            "query_instruction": self.cfg.query_instruction,
            "normalize": self.cfg.normalize,
            "precision": self.cfg.precision,
            "flagembedding": _flag_version(),
        }

    def dimension(self) -> int | None:
        """The vector size from the model's config.json, without loading it (None: unsaid)."""
        try:
            config = json.loads((self.resolve().path / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        size = config.get("hidden_size") if isinstance(config, dict) else None
        return size if isinstance(size, int) else None

    # -- loading ------------------------------------------------------------------------------
    @property
    def model(self) -> Any:
        """The loaded FlagEmbedding object (loads it on first use, shared per process)."""
        resolved = self.resolve()
        key = (
            self.kind,
            str(resolved.path),
            resolved.fingerprint,
            self._pooling(),
            self.cfg.precision,
            self.cfg.normalize,
            tuple(self.cfg.devices),
        )
        return load_shared(key, lambda: self._load_guarded(resolved))

    def _load_guarded(self, resolved: ResolvedModel) -> Any:
        logger.info(
            "loading %s encoder %s (%s, %s)",
            self.kind,
            resolved.name,
            ", ".join(self.cfg.devices),
            self.cfg.precision,
        )
        return load_offline(
            self.model_id,
            resolved,
            self.kind,
            self.cfg.allow_download,
            self.role,
            lambda: self._load(resolved),
        )

    def _common_kwargs(self) -> dict[str, Any]:
        return {
            "normalize_embeddings": self.cfg.normalize,
            "use_fp16": self.cfg.precision == "fp16",
            "use_bf16": self.cfg.precision == "bf16",
            "devices": list(self.cfg.devices),
            "pooling_method": self._pooling(),
            "trust_remote_code": False,
            "batch_size": self.cfg.batch_size,
            "query_max_length": self.cfg.max_length,
            "passage_max_length": self.cfg.max_length,
        }

    def _load(self, resolved: ResolvedModel) -> Any:
        raise NotImplementedError

    def _dense(self, model: Any, texts: list[str], instruction: str | None) -> np.ndarray:
        raise NotImplementedError

    def _dim(self, model: Any) -> int:
        raise NotImplementedError

    # -- encoding -----------------------------------------------------------------------------
    def encode_passages(self, texts: list[str]) -> np.ndarray:
        return self._encode(texts, None, f"encoding passages ({self.kind})", "passage")

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        instruction = self.cfg.query_instruction or None
        return self._encode(texts, instruction, f"encoding queries ({self.kind})", "query")

    @contextlib.contextmanager
    def _encoding(self, model: Any, desc: str, unit: str, total: int) -> Iterator[None]:
        """Around one `encode` call of `model`: its device workers started first (several
        `devices`), outside the progress swap, which then reports its batches."""
        if len(self.cfg.devices) > 1 and model.pool is None:
            model.pool = model.start_multi_process_pool(pool_worker)
        with batches_reported(model, desc, unit, total):
            yield

    def _encode(
        self, texts: list[str], instruction: str | None, desc: str, unit: str
    ) -> np.ndarray:
        model = self.model
        if not texts:
            return np.zeros((0, self._dim(model)), dtype=np.float32)
        with self._encoding(model, desc, unit, len(texts)):
            vectors = np.asarray(self._dense(model, list(texts), instruction), dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(texts):
            raise RuntimeError(
                f"{self.kind} encoder returned shape {vectors.shape} for {len(texts)} texts"
            )
        if self.cfg.normalize:
            # FlagEmbedding normalises in the model's dtype; redo it in float32 so fp16 runs
            # are unit-norm to float32 precision too.
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            vectors = vectors / np.maximum(norms, 1e-12)
        return np.ascontiguousarray(vectors, dtype=np.float32)


class BGEM3Encoder(_FlagEncoderBase):
    """BGE-M3 through `FlagEmbedding.BGEM3FlagModel`; only its dense (CLS) vectors are used.

    The sparse and ColBERT heads (`sparse_linear.pt`, `colbert_linear.pt`) are loaded with it,
    so `encoder.model` stays usable for those outputs; they do not change the dense vectors.
    """

    kind = "bge_m3"

    @classmethod
    def model_of(cls, cfg: EncoderConfig) -> str:
        """`encoder.model`, or BAAI/bge-m3 (looked up in the local HF cache) when it is empty."""
        return cfg.model.strip() or DEFAULT_BGE_M3_MODEL

    def _load(self, resolved: ResolvedModel) -> Any:
        from FlagEmbedding import BGEM3FlagModel

        missing = [h for h in _M3_HEADS if not (resolved.path / h).is_file()]
        if missing:
            logger.warning(
                "%s has no %s: dense vectors are unaffected, but the sparse/ColBERT heads will "
                "be randomly initialised",
                resolved.path,
                " or ".join(missing),
            )
        return BGEM3FlagModel(str(resolved.path), **self._common_kwargs())

    def _dense(self, model: Any, texts: list[str], instruction: str | None) -> np.ndarray:
        out = model.encode(
            texts,
            batch_size=self.cfg.batch_size,
            max_length=self.cfg.max_length,
            return_dense=True,
            return_sparse=False,
            return_colbert_vecs=False,
            instruction=instruction,
            instruction_format="{}{}",
        )
        return out["dense_vecs"]

    def _dim(self, model: Any) -> int:
        return int(model.model.model.config.hidden_size)


class FlagModelEncoder(_FlagEncoderBase):
    """Any encoder-only model FlagEmbedding can load, with `FlagModel` and the configured pooling.

    `FlagModel` (not `FlagAutoModel`) is the right entry point: FlagAutoModel only knows the
    names in its BGE/E5/GTE mapping and needs `model_class` and `pooling_method` spelled out for
    anything else, which is exactly what this config already says.
    """

    kind = "flag"

    def _load(self, resolved: ResolvedModel) -> Any:
        from FlagEmbedding import FlagModel

        return FlagModel(str(resolved.path), **self._common_kwargs())

    def _dense(self, model: Any, texts: list[str], instruction: str | None) -> np.ndarray:
        return model.encode(
            texts,
            batch_size=self.cfg.batch_size,
            max_length=self.cfg.max_length,
            convert_to_numpy=True,
            instruction=instruction,
            instruction_format="{}{}",
        )

    def _dim(self, model: Any) -> int:
        return int(model.model.config.hidden_size)
