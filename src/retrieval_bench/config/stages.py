"""The shipped later stages' keyword arguments: the cross-encoder rerank (`stages.rerank`) and
the context budget (`stages.context`).

Plain dataclasses with defaults; this module imports nothing heavy, so the schema loads without
torch or FlagEmbedding. Each `validate()` raises a ConfigError naming the field (the stage's node
prefixes it: `stages.rerank.depth`); the checks that need the job (a depth against the pool and
top_k) run when the stage runs, those that need the corpus (a context budget below the shortest
passage) once it is loaded (`stages.context`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from retrieval_bench.config.model import ModelConfig
from retrieval_bench.errors import ConfigError

RERANKER_PRECISIONS: tuple[str, ...] = ("fp32", "fp16")


def _positive(key: str, value: int) -> None:
    if isinstance(value, bool) or value < 1:
        raise ConfigError(key, f"must be a positive integer, got {value!r}")


@dataclass
class RerankConfig(ModelConfig):
    """`stages.rerank.model=DIR stages.rerank.depth=N`: rescore the top `depth` passages of each
    query's combined ranking (fused, or the only arm's pool) with FlagEmbedding's FlagReranker
    (an encoder-only cross-encoder such as BAAI/bge-reranker-v2-m3); the rerank stage is those
    `depth` passages in the model's order, and `final` its top_k. The model keys are the shared
    `ModelConfig`'s; the stage runs when `model` names one."""

    model: str = ""
    """The cross-encoder: a local model directory, or a hub id looked up in the local Hugging
    Face cache only (unless allow_download); empty: no rerank stage."""
    depth: int = 10
    """How many of the combined ranking's passages are rescored (at most retriever.pool_size, at
    least top_k); the shipped node follows retriever.pool_size."""
    batch_size: int = 32
    """Query-passage pairs scored per batch (memory, not results)."""
    max_length: int = 512
    """Tokens of query + passage the model reads (longer pairs are truncated)."""
    precision: str = field(default="fp32", metadata={"choices": RERANKER_PRECISIONS})
    """fp16 on GPUs only."""

    @property
    def enabled(self) -> bool:
        return bool(self.model.strip())

    def validate(self) -> None:
        """The values a config can be refused for before any job (the first bad one raises
        ConfigError naming its field); the devices present and the depth against the job's pool
        and top_k are `check_for_job`'s."""
        _positive("depth", self.depth)
        self.validate_model(precisions=RERANKER_PRECISIONS)

    def check_for_job(self, pool_size: int, top_k: int, prefix: str) -> None:
        """When the stage runs: its devices present, and `depth` within what the job gives it
        (each arm returns at most pool_size passages; final cuts the rerank stage to top_k, so a
        shallower rerank would be scored @top_k on a shorter list). Errors name
        `<prefix><field>`."""
        self.validate_model(prefix, RERANKER_PRECISIONS, devices_present=True)
        if self.depth > pool_size:
            raise ConfigError(
                f"{prefix}depth",
                f"{self.depth} is larger than retriever.pool_size={pool_size}: the pool the "
                f"reranker reads holds at most {pool_size} passages per arm; set "
                f"{prefix}depth<={pool_size} or raise retriever.pool_size",
            )
        if self.depth < top_k:
            raise ConfigError(
                f"{prefix}depth",
                f"{self.depth} is smaller than top_k={top_k}: final (the rerank stage cut to "
                f"top_k) would be shorter than what is scored; set {prefix}depth>={top_k}",
            )


@dataclass
class ContextConfig:
    """`stages.context.budget_chars=N stages.context.max_per_doc=M`: what the generator is
    given. Walking the final ranking best first, a passage joins while its text fits what is left
    of the budget; one that does not fit is skipped and the walk goes on (a shorter passage
    further down may still fit), and a document already holding `max_per_doc` passages takes no
    more."""

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
                "budget_chars",
                f"must be a number of characters >= 0 (0: no context stage), "
                f"got {self.budget_chars!r}",
            )
        if isinstance(self.max_per_doc, bool) or self.max_per_doc < 0:
            raise ConfigError(
                "max_per_doc", f"must be >= 0 (0: no limit), got {self.max_per_doc!r}"
            )
        if self.max_per_doc and not self.enabled:
            raise ConfigError(
                "max_per_doc",
                "applies to the context stage, which is off: set its budget_chars=N too",
            )
