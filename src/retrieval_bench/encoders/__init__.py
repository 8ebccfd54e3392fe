"""Encoders for the dense retriever: one config node, one factory, one protocol.

`build_encoder` is the only entry point the rest of the code needs. The FlagEmbedding module
(and with it torch and transformers) is imported only when a `bge_m3` or `flag` encoder is
asked for, so the base install without the `flag` extra runs the offline `use` encoder.
"""

from __future__ import annotations

from retrieval_bench.encoders.base import Encoder
from retrieval_bench.encoders.config import ENCODER_KINDS, EncoderConfig
from retrieval_bench.errors import ConfigError

__all__ = ["ENCODER_KINDS", "Encoder", "EncoderConfig", "build_encoder"]


def build_encoder(cfg: EncoderConfig) -> Encoder:
    """Validate `cfg` and return the encoder it names; no model is loaded until first encode."""
    cfg.validate()
    if cfg.kind == "precomputed":  # files, not a model: encoders.precomputed reads them
        raise ConfigError(
            "encoder.kind", "precomputed vectors are read from encoder.path, never encoded"
        )
    if cfg.kind == "use":
        from retrieval_bench.encoders.use import USEEncoder

        return USEEncoder(cfg)
    # flag.py itself imports no torch; FlagEmbedding loads on first encode.
    from retrieval_bench.encoders.flag import BGEM3Encoder, FlagModelEncoder

    if cfg.kind == "bge_m3":
        return BGEM3Encoder(cfg)
    return FlagModelEncoder(cfg)
