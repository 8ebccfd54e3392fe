"""The typed config of the stages after fusion: `reranker:` and `context:`.

Plain dataclasses with defaults (Hydra structured-config nodes, `conf/reranker/*.yaml`); this
module imports nothing heavy, so the schema loads without torch or FlagEmbedding. Each
`validate()` raises a ConfigError naming the key; the checks that need the corpus (a context
budget below the shortest passage) run once it is loaded (`stages.context`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from retrieval_bench.config.encoder import check_devices
from retrieval_bench.errors import ConfigError

RERANKER_KINDS: tuple[str, ...] = ("none", "cross_encoder")
"""`none`: no rerank stage; `cross_encoder`: FlagEmbedding's `FlagReranker` (an encoder-only
cross-encoder such as BAAI/bge-reranker-v2-m3) scores each (query, passage) pair."""

RERANKER_PRECISIONS: tuple[str, ...] = ("fp32", "fp16")


def _positive(key: str, value: int) -> None:
    if isinstance(value, bool) or value < 1:
        raise ConfigError(key, f"must be a positive integer, got {value!r}")


@dataclass
class RerankerConfig:
    """`reranker=cross_encoder reranker.model=DIR reranker.depth=N`: rescore the top `depth`
    passages of each query's combined ranking (fused, or the only arm's pool) with the model;
    the rerank stage is those `depth` passages in the model's order, and `final` its top_k."""

    kind: str = field(default="none", metadata={"choices": RERANKER_KINDS})
    """The reranker (`reranker=none|cross_encoder`): `none` skips the rerank stage."""
    model: str = ""
    """A local model directory, or a hub id looked up in the local Hugging Face cache only
    (unless allow_download)."""
    depth: int = 10
    """How many of the combined ranking's passages are rescored (at most retriever.pool_size, at
    least top_k); conf/reranker/cross_encoder.yaml sets it to retriever.pool_size."""
    batch_size: int = 32
    """Query-passage pairs scored per batch (memory, not results)."""
    max_length: int = 512
    """Tokens of query + passage the model reads (longer pairs are truncated)."""
    precision: str = field(default="fp32", metadata={"choices": RERANKER_PRECISIONS})
    """fp16 on GPUs only."""
    devices: list[str] = field(default_factory=lambda: ["cpu"])
    """One worker per entry (cpu, cuda, cuda:N, mps), through FlagEmbedding's own pool."""
    allow_download: bool = False
    """Let a model missing from the local cache be downloaded (false: refuse, naming the model)."""

    @property
    def enabled(self) -> bool:
        return self.kind != "none"

    def validate(self, pool_size: int, top_k: int) -> None:
        """The first bad value raises ConfigError naming its key; `pool_size` and `top_k` bound
        the depth (each arm returns at most pool_size passages; final cuts the rerank stage
        to top_k, so a shallower rerank would be scored @top_k on a shorter list)."""
        if self.kind not in RERANKER_KINDS:
            raise ConfigError(
                "reranker.kind",
                f"unknown reranker kind {self.kind!r}; choose one of {', '.join(RERANKER_KINDS)}",
            )
        if not self.enabled:
            if self.model.strip():
                raise ConfigError(
                    "reranker.model",
                    "is set but the rerank stage is off (reranker=none): add "
                    "reranker=cross_encoder to rerank with it",
                )
            return
        if not self.model.strip():
            raise ConfigError(
                "reranker.model",
                "reranker=cross_encoder needs a model: a local directory or a hub id "
                "(e.g. reranker.model=/models/bge-reranker-v2-m3), or use reranker=none",
            )
        _positive("reranker.depth", self.depth)
        if self.depth > pool_size:
            raise ConfigError(
                "reranker.depth",
                f"{self.depth} is larger than retriever.pool_size={pool_size}: the pool the "
                f"reranker reads holds at most {pool_size} passages per arm; set "
                f"reranker.depth<={pool_size} or raise retriever.pool_size",
            )
        if self.depth < top_k:
            raise ConfigError(
                "reranker.depth",
                f"{self.depth} is smaller than top_k={top_k}: final (the rerank stage cut to "
                f"top_k) would be shorter than what is scored; set reranker.depth>={top_k}",
            )
        _positive("reranker.batch_size", self.batch_size)
        _positive("reranker.max_length", self.max_length)
        if self.precision not in RERANKER_PRECISIONS:
            raise ConfigError(
                "reranker.precision",
                f"unknown precision {self.precision!r}; choose one of "
                f"{', '.join(RERANKER_PRECISIONS)}",
            )
        check_devices("reranker.devices", self.devices, present=True)
        if self.precision != "fp32" and "cpu" in self.devices:
            raise ConfigError(
                "reranker.precision",
                f"{self.precision} is for GPUs; set reranker.precision=fp32 or list only GPU "
                f"devices in reranker.devices (now {list(self.devices)})",
            )


@dataclass
class ContextConfig:
    """`context.budget_chars=N context.max_per_doc=M`: what the generator is given. Walking the
    final ranking best first, a passage joins while its text fits what is left of the budget;
    one that does not fit is skipped and the walk goes on (a shorter passage further down may
    still fit), and a document already holding `max_per_doc` passages takes no more."""

    budget_chars: int = 0
    """Characters of passage text (title + newline + text, as the arms read it); 0: no stage."""
    max_per_doc: int = 0
    """Passages per doc_id (a passage without doc_id is its own document); 0: no limit."""

    @property
    def enabled(self) -> bool:
        return self.budget_chars > 0

    def validate(self) -> None:
        if isinstance(self.budget_chars, bool) or self.budget_chars < 0:
            raise ConfigError(
                "context.budget_chars",
                f"must be a number of characters >= 0 (0: no context stage), "
                f"got {self.budget_chars!r}",
            )
        if isinstance(self.max_per_doc, bool) or self.max_per_doc < 0:
            raise ConfigError(
                "context.max_per_doc",
                f"must be >= 0 (0: no limit), got {self.max_per_doc!r}",
            )
        if self.max_per_doc and not self.enabled:
            raise ConfigError(
                "context.max_per_doc",
                "applies to the context stage, which is off: set context.budget_chars=N too",
            )
