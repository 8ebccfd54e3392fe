"""The one typed node shape of a model's settings, shared by the encoder (`encoder:`), the BGE-M3
arms (`arms.m3`, ...) and the cross-encoder stage and judge (`stages.rerank`): which model, where
it runs, at what precision, in what batches, how many tokens it reads, and whether it may be
downloaded. Each of those nodes is a dataclass deriving from `ModelConfig`, so the six keys have
the same names, types and checks everywhere; what is only one model kind's (the encoder's
pooling, M3's weights, the reranker's depth) is its own node's.

Only the standard library here (torch is looked up when a device must be present), so the
schema loads without a model library."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from retrieval_bench.errors import ConfigError

# fp32 everywhere; fp16 / bf16 on GPUs only. In an embedding cache key (it changes the vectors).
PRECISIONS: tuple[str, ...] = ("fp32", "fp16", "bf16")

_DEVICE_RE = re.compile(r"^(cpu|mps|cuda(:\d+)?)$")


@dataclass
class ModelConfig:
    """A model's settings. `model`: a local folder, or a hub id looked up in the local Hugging
    Face cache only (unless `allow_download`); `devices`: one worker per entry (cpu, cuda,
    cuda:N, mps), through FlagEmbedding's own pool when there are several."""

    model: str = ""
    """The model: a local folder, or a hub id looked up in the local Hugging Face cache only
    (unless `allow_download`)."""
    devices: list[str] = field(default_factory=lambda: ["cpu"])
    """Where the model runs: one worker per entry (cpu, cuda, cuda:N, mps)."""
    precision: str = field(default="fp32", metadata={"choices": PRECISIONS})
    """fp32, or fp16 / bf16 on GPUs only."""
    batch_size: int = 32
    """Texts (or pairs) the model reads per batch (memory, not results)."""
    max_length: int = 512
    """Tokens of an input the model reads (longer inputs are truncated)."""
    allow_download: bool = False
    """Let a model missing from the local cache be downloaded (false: refuse, naming the model)."""

    def validate_model(
        self,
        prefix: str = "",
        precisions: tuple[str, ...] = PRECISIONS,
        devices_present: bool = False,
    ) -> None:
        """The six keys' checks; errors name `<prefix><field>` (`encoder.precision`, or the bare
        field, which a plug-in node's caller prefixes). `devices_present`: also refuse a device
        this machine lacks (for a model that is about to load)."""
        if isinstance(self.max_length, bool) or self.max_length <= 0:
            raise ConfigError(
                f"{prefix}max_length", f"must be a positive token count, got {self.max_length!r}"
            )
        if isinstance(self.batch_size, bool) or self.batch_size <= 0:
            raise ConfigError(
                f"{prefix}batch_size", f"must be a positive integer, got {self.batch_size!r}"
            )
        check_devices(f"{prefix}devices", self.devices, present=devices_present)
        if self.precision not in precisions:
            raise ConfigError(
                f"{prefix}precision",
                f"unknown precision {self.precision!r}; choose one of {', '.join(precisions)}",
            )
        if self.precision != "fp32" and "cpu" in self.devices:
            raise ConfigError(
                f"{prefix}precision",
                f"{self.precision} is for GPUs (on CPU it is slow or fails, and FlagEmbedding "
                f"silently runs float32 there); set {prefix}precision=fp32 or list only GPU "
                f"devices in {prefix}devices (now {list(self.devices)})",
            )


def check_devices(key: str, devices: list[str], present: bool) -> None:
    """Each device well-formed and, with `present` (a model will run there), present on this
    machine, before any model loads; else ConfigError naming `key`."""
    if not devices:
        raise ConfigError(key, "needs at least one device, e.g. [cpu]")
    for device in devices:
        if not isinstance(device, str) or not _DEVICE_RE.match(device):
            raise ConfigError(key, f"unknown device {device!r}; use cpu, cuda, cuda:N or mps")
    if present:
        missing = [d for d in devices if not device_present(d)]
        if missing:
            raise ConfigError(
                key, f"{', '.join(missing)} not present on this machine ({machine_devices()})"
            )


def _torch() -> object | None:
    try:
        import torch
    except ImportError:
        return None
    return torch


def device_present(device: str) -> bool:
    """Whether torch can use `device` here (cpu always; cuda:N below the GPU count; mps)."""
    if device == "cpu":
        return True
    torch: object | None = _torch()
    if torch is None:
        return False
    if device.startswith("cuda"):
        index = int(device.partition(":")[2] or 0)
        cuda = torch.cuda  # type: ignore[attr-defined]
        return bool(cuda.is_available()) and index < int(cuda.device_count())
    return bool(torch.backends.mps.is_available())  # type: ignore[attr-defined]


def machine_devices() -> str:
    """What this machine offers, for the message that refuses a device."""
    torch: object | None = _torch()
    if torch is None:
        return "torch is not installed (pip install 'retrieval-bench[flag]'), so only cpu"
    found = ["cpu"]
    cuda = torch.cuda  # type: ignore[attr-defined]
    if cuda.is_available():
        found += [f"cuda:{i}" for i in range(int(cuda.device_count()))]
    if torch.backends.mps.is_available():  # type: ignore[attr-defined]
        found.append("mps")
    return "it has " + ", ".join(found)
