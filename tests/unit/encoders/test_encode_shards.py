"""Sharded encode: shards are cache entries, assembled without re-encoding, resumed, required."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import compose_config, mini_overrides, run_app

from retrieval_bench.config import register_configs
from retrieval_bench.encoders.cache import EmbeddingCache
from retrieval_bench.encoders.shards import (
    MissingShards,
    encode_shard,
    encode_sharded,
    shard_bounds,
)
from retrieval_bench.errors import ConfigError
from retrieval_bench.job.runner import run_job, run_shard_job

register_configs()
TEXTS = [f"passage {i} 第{i}段" for i in range(10)]


class HashEncoder:
    """Deterministic per-text vectors; records which texts it was asked to encode."""

    def __init__(self) -> None:
        self.encoded: list[str] = []

    def identity(self) -> dict[str, Any]:
        return {"kind": "hash", "dim": 4}

    def dimension(self) -> int:
        return 4

    def _vectors(self, texts: list[str]) -> np.ndarray:
        self.encoded += texts
        rows = [np.frombuffer(hashlib.sha256(t.encode()).digest()[:16], np.uint32) for t in texts]
        vectors = np.asarray(rows, dtype=np.float64).reshape(len(texts), 4)
        # Unit rows, as the Encoder protocol asks (the encoder boundary refuses others).
        return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)

    encode_passages = _vectors
    encode_queries = _vectors


def test_shards_are_contiguous_and_nearly_equal() -> None:
    assert shard_bounds(10, 3) == [(0, 4), (4, 7), (7, 10)]
    assert shard_bounds(3, 3) == [(0, 1), (1, 2), (2, 3)]
    assert shard_bounds(5, 1) == [(0, 5)]
    for bad in (0, 11):
        with pytest.raises(ConfigError) as err:
            shard_bounds(10, bad)
        assert err.value.key == "encoder.shards"
        assert "corpus of 10 passages" in str(err.value)


def test_assembled_shards_equal_the_whole_and_are_not_encoded_again(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path)
    encoder = HashEncoder()
    vectors, stats = encode_sharded(cache, encoder, TEXTS, 3)
    np.testing.assert_array_equal(vectors, HashEncoder()._vectors(TEXTS))
    assert (stats.encoded, stats.cached) == (10, 0)
    assert len(list(tmp_path.rglob("*.npy"))) == 3, "one cache entry per shard"
    encoder.encoded.clear()
    again, stats_again = encode_sharded(cache, encoder, TEXTS, 3)
    assert encoder.encoded == [] and (stats_again.encoded, stats_again.cached) == (0, 10)
    np.testing.assert_array_equal(again, vectors)
    assert stats_again.key == stats.key
    # the assembled key follows the shards' contents
    other, other_stats = encode_sharded(EmbeddingCache(tmp_path / "b"), HashEncoder(), TEXTS, 2)
    assert other_stats.key != stats.key
    np.testing.assert_array_equal(other, vectors)


def test_an_interrupted_sharded_encode_resumes_with_the_missing_shards(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path)
    shard_job = HashEncoder()
    assert encode_shard(cache, shard_job, TEXTS, 3, 1).encoded == 3
    assert shard_job.encoded == TEXTS[4:7]
    main_job = HashEncoder()
    vectors, stats = encode_sharded(cache, main_job, TEXTS, 3)
    assert main_job.encoded == TEXTS[:4] + TEXTS[7:], "only shards 0 and 2 were encoded"
    assert (stats.encoded, stats.cached) == (7, 3)
    np.testing.assert_array_equal(vectors, HashEncoder()._vectors(TEXTS))


def test_required_shards_name_the_missing_ones_and_their_command(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path)
    encode_shard(cache, HashEncoder(), TEXTS, 3, 1)
    encoder = HashEncoder()
    with pytest.raises(MissingShards) as err:
        encode_sharded(cache, encoder, TEXTS, 3, require=True)
    assert encoder.encoded == [], "assembling only never encodes"
    assert err.value.missing == [0, 2]
    overrides = ["retriever=dense", "encoder.shards=3", "encoder.require_shards=true"]
    message = str(err.value.with_overrides(overrides))
    assert "2 of 3 shards are not in the embedding cache: shard 0,2" in message
    assert message.endswith(
        "python -m run -m retriever=dense encoder.shards=3 encoder.shard_only=0,2 "
        "hydra/launcher=parallel"
    )
    assert "'encoder.require_shards'" in message
    encode_shard(cache, HashEncoder(), TEXTS, 3, 0)
    encode_shard(cache, HashEncoder(), TEXTS, 3, 2)
    assembled, stats = encode_sharded(cache, encoder, TEXTS, 3, require=True)
    assert encoder.encoded == [] and stats.cached == 10
    np.testing.assert_array_equal(assembled, HashEncoder()._vectors(TEXTS))


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (["encoder.shards=0"], "encoder.shards"),
        (["encoder.shards=2", "encoder.shard_only=2"], "encoder.shard_only"),
        (["encoder.shard_only=-1"], "encoder.shard_only"),
        (
            ["encoder.shards=2", "encoder.shard_only=0", "encoder.require_shards=true"],
            "encoder.require_shards",
        ),
    ],
)
def test_bad_shard_settings_name_their_key(overrides: list[str], key: str) -> None:
    with pytest.raises(ConfigError) as err:
        compose_config(overrides)
    assert err.value.key == key


def test_more_shards_than_passages_is_refused_after_loading(tmp_path: Path) -> None:
    cfg = compose_config([*mini_overrides(tmp_path), "retriever=dense", "encoder.shards=13"])
    with pytest.raises(ConfigError) as err:
        run_job(cfg)
    assert err.value.key == "encoder.shards"
    assert "corpus of 12 passages" in str(err.value)


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_shard_jobs_then_the_job_gives_the_unsharded_vectors(tmp_path: Path) -> None:
    """USE on the mini set: two shard jobs, then the retrieving job reads them (no encoding)
    and ranks as the unsharded job does."""
    base = [*mini_overrides(tmp_path), "retriever=dense", "encoder.shards=2"]
    for shard in (0, 1):
        result = run_shard_job(compose_config([*base, f"encoder.shard_only={shard}"]))
        assert (result.shard, result.passages, result.stats.encoded) == (shard, 6, 6)
    sharded = run_job(compose_config([*base, "encoder.require_shards=true"]))
    assert sharded.embeddings["passages"] == {"encoded": 0, "cached": 12}
    whole = run_job(compose_config([*mini_overrides(tmp_path / "whole"), "retriever=dense"]))
    for a, b in zip(sharded.records, whole.records, strict=True):
        assert a.stages["dense"].ids == b.stages["dense"].ids
        np.testing.assert_allclose(a.stages["dense"].scores, b.stages["dense"].scores, atol=1e-5)


@pytest.mark.slow
def test_app_sharded_encode_as_a_multirun_then_assembled(tmp_path: Path) -> None:
    common = [*mini_overrides(tmp_path), "retriever=dense", "encoder.shards=2"]
    missing = run_app([*common, "encoder.require_shards=true", f"hydra.run.dir={tmp_path}/r1"])
    assert missing.returncode == 2, missing.stderr
    assert "shard 0,1" in missing.stderr and "encoder.shard_only=0,1" in missing.stderr
    shards = run_app(["-m", *common, "encoder.shard_only=0,1", f"hydra.sweep.dir={tmp_path}/sweep"])
    assert shards.returncode == 0, shards.stderr
    assert "shard 0 of 2 (6 passages): encoded 6" in shards.stdout
    assert "shard 1 of 2 (6 passages): encoded 6" in shards.stdout
    assert "comparison" not in shards.stdout + shards.stderr
    job = run_app([*common, "encoder.require_shards=true", f"hydra.run.dir={tmp_path}/r2"])
    assert job.returncode == 0, job.stderr
    assert "passages encoded 0, from cache 12" in job.stdout
