"""The encoder boundary (encoders.checked): an encoder's vectors are checked like an arm's
rankings, whether encoded now or read from a cache an earlier encoder wrote, and an outside
encoder's exception is its own (exit 2 naming it), a shipped one's the project's bug."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import compose_config
from support.fakes import PASSAGES, CountingEncoder

from retrieval_bench.encoders.cache import EmbeddingCache, cache_key
from retrieval_bench.errors import BenchError
from retrieval_bench.plugins import PluginError
from retrieval_bench.protocols import BuildContext
from retrieval_bench.records import EvalQuery, Ranked
from retrieval_bench.retrievers.dense import DenseArmSpec
from retrieval_bench.tiebreak import TieBreak
from run.exits import bad_input_message

FAULTY = "support.faulty_plugins.FaultyEncoder"
QUERIES = [
    EvalQuery(f"q{i}", f"问题 {i}", "t", "reviewed", relevance={"p0": 1})
    for i in range(3)
]


def dense_arm_search(tmp_path: Path, *overrides: str) -> list[Ranked]:
    """A dense arm over the ten fake passages with `overrides` of the encoder, built and
    searched as a job does (check, build, search)."""
    cfg = compose_config(
        ["retriever=dense", f"encoder._target_={FAULTY}", f"cache_dir={tmp_path}", *overrides]
    )
    ctx = BuildContext(PASSAGES, QUERIES, cfg, TieBreak([p.id for p in PASSAGES]), tmp_path)
    spec = DenseArmSpec()
    spec.check("dense", ctx)
    arm = spec.build("dense", ctx)
    return arm.search(QUERIES, 5, [None] * len(QUERIES))


@pytest.mark.parametrize(
    ("fault", "says"),
    [
        ("nan_passages", "the vector of passage 'p5' holds nan at dimension 3 (1 of 10 passages"),
        ("nan_queries", "the vector of query 'q1' holds nan at dimension 3 (1 of 3 queries"),
        ("norm3_passages", "the vector of passage 'p0' has norm 3, not unit-norm (10 of 10"),
        ("zero_queries", "the vector of query 'q0' is all zeros, not unit-norm (1 of 3 queries"),
        ("rows_passages", "encode_passages() returned shape (9, 8) for 10 passages; expected one"),
        ("dim_queries", "encode_queries() returned 16-dimensional vectors, but its vectors are 8-"),
    ],
)
def test_an_encoders_bad_vectors_stop_the_job_naming_it_the_text_and_the_value(
    tmp_path: Path, fault: str, says: str
) -> None:
    with pytest.raises(BenchError) as refused:
        dense_arm_search(tmp_path, f"encoder.model={fault}")
    message = str(refused.value)
    assert message.startswith(f"encoder {FAULTY}: "), message
    assert says in message, message
    assert bad_input_message(refused.value) == message  # exit 2 with this line (run.exits)


def test_vectors_declared_not_unit_norm_are_taken_as_they_are(tmp_path: Path) -> None:
    """`encoder.normalize=false` declares vectors meant for inner product: norm 3 passes, and
    the scores are the inner products it gives (3 times the cosine)."""
    plain = dense_arm_search(tmp_path / "plain")
    tripled = dense_arm_search(tmp_path / "tripled", "encoder.model=norm3_passages",
                               "encoder.normalize=false")  # fmt: skip
    for a, b in zip(plain, tripled, strict=True):
        assert list(a.indices) == list(b.indices)
        assert np.allclose(b.scores, 3 * a.scores, rtol=1e-5)


@pytest.mark.parametrize("where", ["init", "identity", "dimension", "encode"])
def test_an_exception_inside_an_outside_encoder_is_its_own(tmp_path: Path, where: str) -> None:
    with pytest.raises(PluginError) as refused:
        dense_arm_search(tmp_path, f"encoder.model=raise_in_{where}")
    message = str(refused.value)
    method = {"init": "__init__", "encode": "encode_passages"}.get(where, where)
    assert message == (
        f"encoder: {FAULTY}.{method}() raised FaultError: planted fault in {where}"
    ), message
    assert bad_input_message(refused.value) == message


def test_a_shipped_encoders_bad_vectors_are_refused_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """USE's own `encode_passages` giving a NaN (no model loads: the method is replaced)."""
    from retrieval_bench.config.encoder import USE_ENCODER, EncoderConfig
    from retrieval_bench.encoders import build_encoder
    from retrieval_bench.encoders.use import USEEncoder

    def nan_vectors(self: Any, texts: list[str]) -> np.ndarray:
        vectors = np.full((len(texts), 512), 512**-0.5, dtype=np.float32)
        vectors[-1, 7] = np.nan
        return vectors

    monkeypatch.setattr(USEEncoder, "encode_passages", nan_vectors)
    encoder = build_encoder(EncoderConfig(_target_=USE_ENCODER))
    says = (
        r"^encoder retrieval_bench\.encoders\.use\.USEEncoder: the vector of passage #2 of "
        r"the batch \('b'\) holds nan at dimension 7"
    )
    with pytest.raises(BenchError, match=says):
        EmbeddingCache(tmp_path).encode(encoder, ["a", "b"], "passages")


def test_a_shipped_encoders_own_exception_is_the_projects_bug(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from retrieval_bench.config.encoder import USE_ENCODER, EncoderConfig
    from retrieval_bench.encoders import build_encoder
    from retrieval_bench.encoders.use import USEEncoder

    def broken(self: Any, texts: list[str]) -> np.ndarray:
        raise ZeroDivisionError("a bug of ours")

    monkeypatch.setattr(USEEncoder, "encode_passages", broken)
    with pytest.raises(ZeroDivisionError):
        EmbeddingCache(tmp_path).encode(
            build_encoder(EncoderConfig(_target_=USE_ENCODER)), ["a"], "passages"
        )


class TripledEncoder(CountingEncoder):
    """CountingEncoder's identity, vectors of norm 3: the bug that wrote a cache entry."""

    def encode_passages(self, texts: list[str]) -> np.ndarray:
        return 3 * super().encode_passages(texts)


def test_a_cache_entry_a_buggy_encoder_wrote_is_encoded_again_and_checked(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    texts = ["北京", "上海", "深圳"]
    cache = EmbeddingCache(tmp_path)
    good = CountingEncoder()
    # The entry as a cache without the boundary stored it: norm-3 vectors, checksum and all.
    key = cache_key(good.identity(), "passages", texts)
    npy, sidecar, _ = cache.paths(key)
    bad = TripledEncoder().encode_passages(texts)
    EmbeddingCache._write(npy, sidecar, bad, key, good.identity(), "passages")
    assert cache.lookup(good, texts, "passages") is None  # refused, never handed on
    says = r"the vector of passage #1 of the batch \('北京'\) has norm 3"
    with pytest.raises(BenchError, match=says):
        cache.encode(TripledEncoder(), texts, "passages")  # still buggy: refused again
    with caplog.at_level(logging.WARNING, logger="retrieval_bench.encoders.cache"):
        vectors, stats = cache.encode(good, texts, "passages")  # fixed: encoded again
    assert "its vectors are refused" in caplog.text
    assert (stats.encoded, stats.cached) == (3, 0)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    assert np.array_equal(vectors, good.encode_passages(texts))
    assert np.array_equal(cache.lookup(good, texts, "passages"), vectors)  # and now kept
