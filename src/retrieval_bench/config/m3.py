"""The `m3:` config node: BGE-M3's three outputs (dense, sparse, ColBERT) as arms.

Only plain typed fields (a Hydra structured-config node); imports nothing heavy. The model
fields mean what the `encoder:` node's fields of the same names mean, and are checked by the
same code (`EncoderConfig.validate`), with errors naming `m3.<field>`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from retrieval_bench.config.encoder import BGE_M3_ENCODER, DEFAULT_BGE_M3_MODEL, EncoderConfig
from retrieval_bench.errors import ConfigError

M3_MODES: tuple[str, ...] = ("dense", "sparse", "colbert", "all")
"""What an m3 arm scores with: one of BGE-M3's three outputs, or `all`, their weighted sum."""


@dataclass
class M3Config:
    """One BGE-M3 model, one encode of the corpus, scored three ways and by their weighted sum."""

    model: str = DEFAULT_BGE_M3_MODEL
    """A local folder or a hub id (looked up in the local HF cache only, unless allow_download)."""
    max_length: int = 512
    """Tokens of a text the model reads (longer texts are truncated)."""
    batch_size: int = 16
    """Texts encoded per batch (memory, not results)."""
    precision: str = "fp32"
    """fp32, or fp16 / bf16 on GPUs only."""
    devices: list[str] = field(default_factory=lambda: ["cpu"])
    """Where the model encodes: one process per entry (cpu, cuda, cuda:N, mps)."""
    allow_download: bool = False
    """Let a model missing from the local cache be downloaded (false: refuse, naming the model)."""
    weights: list[float] = field(default_factory=lambda: [0.4, 0.2, 0.4])
    """[dense, sparse, colbert]: FlagEmbedding's `weights_for_different_modes`. The `m3` arm's
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
        """Bad values raise ConfigError naming `m3.<field>`, before any model is loaded."""
        try:
            self.encoder_config().validate()
        except ConfigError as exc:
            field_name = exc.key.rpartition(".")[2]
            raise ConfigError(
                f"m3.{field_name}", str(exc).split(": ", 1)[1].replace("encoder.", "m3.")
            ) from exc
        check_weights("m3.weights", self.weights)
        if isinstance(self.colbert_depth, bool) or self.colbert_depth < 0:
            raise ConfigError(
                "m3.colbert_depth",
                f"must be 0 (exact, every passage) or a positive depth, got {self.colbert_depth!r}",
            )


def check_weights(key: str, weights: list[float]) -> None:
    """Three non-negative weights [dense, sparse, colbert] with a positive sum."""
    if len(weights) != 3:
        raise ConfigError(key, f"needs three weights [dense, sparse, colbert], got {list(weights)}")
    if any(w < 0 for w in weights) or sum(weights) <= 0:
        raise ConfigError(key, f"weights must be >= 0 with a positive sum, got {list(weights)}")
