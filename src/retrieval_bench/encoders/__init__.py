"""Encoders for the dense retriever: one config node, one registry of kinds, one protocol.

`build_encoder` is the only entry point the rest of the code needs; `encoder.kind` names a
registered kind (ENCODER_CLASSES) or any encoder class by its path. The FlagEmbedding module
(and with it torch and transformers) is imported only when a `bge_m3` or `flag` encoder is
asked for, so the base install without the `flag` extra runs the offline `use` encoder.
"""

from __future__ import annotations

from hydra.utils import get_class

from retrieval_bench.config.encoder import ENCODER_CLASSES, ENCODER_KINDS, EncoderConfig
from retrieval_bench.errors import ConfigError
from retrieval_bench.protocols import Encoder

__all__ = ["ENCODER_CLASSES", "ENCODER_KINDS", "Encoder", "EncoderConfig", "build_encoder"]


def build_encoder(cfg: EncoderConfig) -> Encoder:
    """Validate `cfg` and return the encoder its kind names (a registered kind, or a class
    path); no model is loaded until first encode."""
    cfg.validate()
    if cfg.kind == "precomputed":  # files, not a model: encoders.precomputed reads them
        raise ConfigError(
            "encoder.kind", "precomputed vectors are read from encoder.path, never encoded"
        )
    path = ENCODER_CLASSES.get(cfg.kind, cfg.kind)
    try:
        encoder_class = get_class(path)
    except Exception as error:  # Hydra wraps the import error: say which key named it
        raise ConfigError("encoder.kind", f"cannot import {path!r}: {error}") from error
    return encoder_class(cfg)  # type: ignore[no-any-return]
