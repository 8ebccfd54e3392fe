"""Encoders for the dense retriever: one typed config node, classes named by its `_target_`.

`build_encoder` is the only entry point the rest of the code needs: `encoder._target_` names the
class (the shipped ones, or a team's own anywhere on the path), built with the `encoder:` node.
An encoder class may define `check_config(cfg)` for what only it can judge (a model's devices,
USE's unit vectors); `check_encoder_config` runs it before any model loads. The FlagEmbedding
module (and with it torch and transformers) is imported only when a FlagEmbedding encoder is
built, so the base install without the `flag` extra runs the offline USE encoder.
"""

from __future__ import annotations

from retrieval_bench.config.encoder import EncoderConfig
from retrieval_bench.encoders.checked import CheckedEncoder
from retrieval_bench.errors import ConfigError
from retrieval_bench.plugins import guarded_call, locate
from retrieval_bench.protocols import Encoder

__all__ = [
    "CheckedEncoder",
    "Encoder",
    "EncoderConfig",
    "build_encoder",
    "check_encoder_config",
    "encoder_class",
]


def encoder_class(cfg: EncoderConfig, key: str = "encoder") -> type:
    """The class `<key>._target_` names (ConfigError naming the key when it is not there)."""
    return locate(f"{key}._target_", cfg._target_, kind="encoders")


def is_precomputed(cfg: EncoderConfig) -> bool:
    """Whether the node names vectors read from files rather than an encoder."""
    return bool(getattr(encoder_class(cfg), "precomputed", False))


def check_encoder_config(cfg: EncoderConfig, key: str = "encoder") -> None:
    """The node's own checks (`validate`), then its class's `check_config`, before any model
    loads; ConfigError naming the key."""
    cfg.validate()
    cls = encoder_class(cfg, key)
    check = getattr(cls, "check_config", None)
    if check is not None:
        guarded_call("encoder", cls, check, cfg)


def build_encoder(cfg: EncoderConfig) -> CheckedEncoder:
    """The encoder `cfg._target_` names, checked and built with `cfg`, behind the encoder
    boundary (`encoders.checked`: its calls guarded, its vectors checked); no model is loaded
    until first encode."""
    check_encoder_config(cfg)
    if is_precomputed(cfg):  # files, not a model: the dense arm reads them (load_precomputed)
        raise ConfigError(
            "encoder._target_", "precomputed vectors are read from encoder.path, never encoded"
        )
    cls = encoder_class(cfg)
    encoder = guarded_call("encoder", cls, cls, cfg)
    return CheckedEncoder(encoder, unit=cfg.normalize)
