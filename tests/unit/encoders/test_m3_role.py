"""The BGE-M3 arms' model is the `arms.m3` node's: every missing-model message (not found when
resolving, or not loadable when loading) names its keys and the m3 way out, never `encoder.`."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.random_models import unloadable_model

from retrieval_bench.config.m3 import M3ArmConfig
from retrieval_bench.encoders.m3 import M3Encoder
from retrieval_bench.errors import EncoderUnavailable


def test_a_model_not_found_names_the_m3_node(tmp_path: Path) -> None:
    missing = tmp_path / "no-bge-m3"
    with pytest.raises(EncoderUnavailable) as err:
        M3Encoder(M3ArmConfig(mode="all", model=str(missing)).encoder_config()).resolve()
    assert str(err.value) == (
        f"arms.m3 model '{missing}' cannot be loaded: no directory at {missing}. "
        "Set arms.m3.model=/local/path/to/no-bge-m3 to a downloaded copy of the model, "
        "or leave the m3 arms out of retriever.arms."
    )


@pytest.mark.slow  # the load is tried: torch and FlagEmbedding
def test_a_model_that_does_not_load_names_the_m3_node(tmp_path: Path) -> None:
    broken = Path(unloadable_model(tmp_path / "broken-m3", b"not a safetensors file"))
    encoder = M3Encoder(M3ArmConfig(mode="all", model=str(broken)).encoder_config())
    with pytest.raises(EncoderUnavailable) as err:
        encoder.model  # noqa: B018  (loading is the property's work)
    message = str(err.value)
    assert message.startswith(
        f"arms.m3 model '{broken}' cannot be loaded: {broken} is not a loadable"
    )
    assert message.endswith(
        "Set arms.m3.model=/local/path/to/broken-m3 to a downloaded copy of the model, "
        "or leave the m3 arms out of retriever.arms."
    )
    assert "encoder" not in message.replace("bge_m3", "")
