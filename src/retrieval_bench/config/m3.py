"""The BGE-M3 arms' keyword arguments (`arms.m3`, `arms.m3_dense`, ...): BGE-M3's three outputs
(dense, sparse, ColBERT) as arms, and their weighted sum.

Only plain typed fields; imports nothing heavy. The model keys are the shared `ModelConfig`'s
(model, devices, precision, batch_size, max_length, allow_download), checked by the same code as
the encoder's, with errors naming the arm's own keys (`arms.m3.precision`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from retrieval_bench.config.encoder import BGE_M3_ENCODER, DEFAULT_BGE_M3_MODEL, EncoderConfig
from retrieval_bench.config.model import ModelConfig
from retrieval_bench.errors import ConfigError

M3_MODES: tuple[str, ...] = ("dense", "sparse", "colbert", "all")
"""What an m3 arm scores with: one of BGE-M3's three outputs, or `all`, their weighted sum."""


@dataclass(kw_only=True)
class M3ArmConfig(ModelConfig):
    """One BGE-M3 model, one encode of the corpus, scored three ways and by their weighted sum.
    `retrieval_bench.retrievers.m3.M3Spec` is this dataclass with `build`."""

    mode: str = field(metadata={"choices": M3_MODES})
    """What this arm ranks by: one of BGE-M3's outputs (dense, sparse, colbert), or `all`, their
    weighted sum."""
    model: str = DEFAULT_BGE_M3_MODEL
    """A local folder or a hub id (looked up in the local HF cache only, unless allow_download)."""
    batch_size: int = 16
    """Texts encoded per batch (memory, not results)."""
    weights: list[float] = field(default_factory=lambda: [0.4, 0.2, 0.4])
    """[dense, sparse, colbert]: FlagEmbedding's `weights_for_different_modes`. The `all` mode's
    score is their weighted sum divided by the weights' sum, as BGEM3FlagModel.compute_score
    gives it under `colbert+sparse+dense`."""
    colbert_depth: int = 0
    """0: ColBERT scores every allowed passage (exact; costs one (query tokens x corpus tokens)
    product per query). N > 0: only the union of the dense and sparse top N of each query."""

    def encoder_config(self) -> EncoderConfig:
        """The same model as an `encoder:` node, so loading, identity and checks are shared."""
        return EncoderConfig(
            _target_=BGE_M3_ENCODER,
            model=self.model,
            max_length=self.max_length,
            batch_size=self.batch_size,
            precision=self.precision,
            devices=list(self.devices),
            allow_download=self.allow_download,
        )

    def validate(self) -> None:
        """Bad values raise ConfigError naming the field (the arm's node prefixes it), before
        any model is loaded."""
        if self.mode not in M3_MODES:
            raise ConfigError(
                "mode", f"unknown BGE-M3 mode {self.mode!r}; choose one of {', '.join(M3_MODES)}"
            )
        self.validate_model()
        check_weights("weights", self.weights)
        if isinstance(self.colbert_depth, bool) or self.colbert_depth < 0:
            raise ConfigError(
                "colbert_depth",
                f"must be 0 (exact, every passage) or a positive depth, got {self.colbert_depth!r}",
            )


def check_weights(key: str, weights: list[float]) -> None:
    """Three non-negative weights [dense, sparse, colbert] with a positive sum."""
    if len(weights) != 3:
        raise ConfigError(key, f"needs three weights [dense, sparse, colbert], got {list(weights)}")
    if any(w < 0 for w in weights) or sum(weights) <= 0:
        raise ConfigError(key, f"weights must be >= 0 with a positive sum, got {list(weights)}")
