"""encoder.devices and encoder.precision: several processes give the vectors of one, in order."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
import pytest
from support.random_models import SAMPLE_SENTENCES, build_random_bge_m3, unloadable_model

from retrieval_bench.config.encoder import BGE_M3_ENCODER, USE_ENCODER
from retrieval_bench.config.model import device_present
from retrieval_bench.encoders import EncoderConfig, build_encoder, check_encoder_config
from retrieval_bench.encoders.flag import BGEM3Encoder
from retrieval_bench.errors import ConfigError

# Lengths from 1 to ~120 tokens, shuffled: FlagEmbedding sorts each call's texts by length.
VARIED = [SAMPLE_SENTENCES[i % len(SAMPLE_SENTENCES)] * (1 + (i * 7) % 9) for i in range(23)]


@pytest.fixture(scope="module")
def tiny_m3_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("tiny-bge-m3-devices")
    build_random_bge_m3(target)
    return target


def _m3(path: Path, **overrides: Any) -> Any:
    return build_encoder(
        EncoderConfig(
            _target_=BGE_M3_ENCODER, model=str(path), max_length=128, batch_size=4, **overrides
        )
    )


@pytest.mark.slow  # starts FlagEmbedding's pool: two processes each load the model
def test_two_cpu_processes_give_the_vectors_of_one(tiny_m3_dir: Path) -> None:
    one_encoder = _m3(tiny_m3_dir)
    one = one_encoder.encode_passages(VARIED)
    two_encoder = _m3(tiny_m3_dir, devices=["cpu", "cpu"])
    two = two_encoder.encode_passages(VARIED)
    np.testing.assert_allclose(two, one, atol=1e-5)
    assert two.dtype == np.float32 and two.shape == (len(VARIED), 32)
    assert two_encoder.model.pool is not None, "the two devices went through FlagEmbedding's pool"
    assert len(two_encoder.model.pool["processes"]) == 2
    # queries through the same pool, with their instruction
    np.testing.assert_allclose(
        two_encoder.encode_queries(VARIED[:5]), one_encoder.encode_queries(VARIED[:5]), 1e-5
    )


@pytest.mark.slow  # loads the (tiny) model: torch and FlagEmbedding
def test_length_sorted_batches_keep_the_input_order(tiny_m3_dir: Path) -> None:
    """FlagEmbedding encodes each call's texts longest first (less padding) and puts the rows
    back in input order: each row equals that text encoded alone."""
    encoder = _m3(tiny_m3_dir)
    together = encoder.encode_passages(VARIED)
    alone = np.vstack([encoder.encode_passages([t]) for t in VARIED])
    np.testing.assert_allclose(together, alone, atol=1e-5)


def test_devices_leave_the_cache_key_precision_enters_it(tmp_path: Path) -> None:
    # The identity reads the folder, never loads the model: a folder none loads from will do.
    tiny_m3_dir = Path(unloadable_model(tmp_path / "model"))
    base = _m3(tiny_m3_dir).identity()
    assert _m3(tiny_m3_dir, devices=["cpu", "cpu"]).identity() == base
    # (built without validate: this machine has no GPU for fp16, the identity needs none)
    for precision in ("fp16", "bf16"):
        cfg = EncoderConfig(
            _target_=BGE_M3_ENCODER, model=str(tiny_m3_dir), max_length=128, precision=precision
        )
        ident = BGEM3Encoder(cfg).identity()
        assert ident["precision"] == precision
        assert ident != base


@pytest.mark.parametrize(
    ("overrides", "key", "words"),
    [
        ({"devices": ["gpu0"]}, "encoder.devices", "unknown device 'gpu0'"),
        ({"devices": []}, "encoder.devices", "at least one"),
        ({"precision": "fp8"}, "encoder.precision", "unknown precision"),
        ({"precision": "bf16"}, "encoder.precision", "for GPUs"),
        ({"_target_": USE_ENCODER, "precision": "fp16"}, "encoder.precision", "float32"),
    ],
)
def test_bad_devices_and_precision_name_their_key(
    overrides: dict[str, Any], key: str, words: str
) -> None:
    cfg = EncoderConfig(**{"_target_": BGE_M3_ENCODER, **overrides})
    with pytest.raises(ConfigError) as err:
        check_encoder_config(cfg)
    assert err.value.key == key
    assert words in str(err.value)


@pytest.mark.slow  # asks torch which devices there are (its import)
def test_a_device_this_machine_lacks_is_refused_at_start() -> None:
    absent = next(f"cuda:{i}" for i in range(16) if not device_present(f"cuda:{i}"))
    cfg = EncoderConfig(_target_=BGE_M3_ENCODER, devices=["cpu", absent], model="/nowhere")
    with pytest.raises(ConfigError) as err:
        check_encoder_config(cfg)  # before any model is looked for
    assert err.value.key == "encoder.devices"
    assert f"{absent} not present on this machine" in str(err.value)
    assert "it has cpu" in str(err.value)
