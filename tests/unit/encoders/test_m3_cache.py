"""M3Cache goes through the embedding cache's read-or-build mechanism: a hit encodes nothing, an
untrustworthy entry is rebuilt with a warning, and the .npz never holds a pickle."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from retrieval_bench.encoders.m3 import M3Cache, M3Outputs

DIM = 4


class _CountingEncoder:
    """Stands in for M3Encoder: a fixed identity and outputs derived from each text's length."""

    def __init__(self) -> None:
        self.calls = 0

    def identity(self) -> dict[str, Any]:
        return {"kind": "stub_m3", "dim": DIM}

    def encode_outputs(self, texts: list[str], role: str) -> M3Outputs:
        self.calls += 1
        dense = [[float(len(t)), 1.0, 0.0, 0.0] for t in texts]
        colbert = [np.ones((len(t), DIM), dtype=np.float32) for t in texts]
        weights = [{str(len(t)): 0.5} for t in texts]
        return M3Outputs.from_flag(
            {"dense_vecs": dense, "lexical_weights": weights, "colbert_vecs": colbert}, DIM
        )


def test_a_hit_encodes_nothing_and_an_invalid_entry_is_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    encoder = _CountingEncoder()
    cache = M3Cache(tmp_path)
    texts = ["ab", "cde"]
    first, stats = cache.encode(encoder, texts, "passages")  # type: ignore[arg-type]
    assert (stats.encoded, stats.cached, encoder.calls) == (2, 0, 1)

    again, stats = cache.encode(encoder, texts, "passages")  # type: ignore[arg-type]
    assert (stats.encoded, stats.cached, encoder.calls) == (0, 2, 1)
    for name, array in first.arrays().items():
        np.testing.assert_array_equal(again.arrays()[name], array)
    npz, sidecar, _ = cache.paths(stats.key)
    with np.load(npz, allow_pickle=False) as data:
        assert sorted(data.files) == sorted(first.arrays())

    meta = json.loads(sidecar.read_text(encoding="utf-8"))
    sidecar.write_text(json.dumps({**meta, "count": 3}), encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        rebuilt, stats = cache.encode(encoder, texts, "passages")  # type: ignore[arg-type]
    assert (stats.encoded, stats.cached, encoder.calls) == (2, 0, 2)
    assert f"cache entry {npz} is invalid (sidecar count is not 2); rebuilding it" in caplog.text
    assert json.loads(sidecar.read_text(encoding="utf-8"))["count"] == 2
    np.testing.assert_array_equal(rebuilt.dense, first.dense)
