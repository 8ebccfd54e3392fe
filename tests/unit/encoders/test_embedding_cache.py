"""The embedding cache is the unit here, so a small counting encoder stands in for a model."""

from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.fakes import CountingEncoder

from retrieval_bench.encoders.cache import CacheStats, EmbeddingCache, cache_key

TEXTS = ["北京是中国的首都。", "上海的交通非常方便。", "", "A passage in English.", "深圳"]


def _files(cache: EmbeddingCache, stats: CacheStats) -> tuple[Path, Path]:
    npy, sidecar, _ = cache.paths(stats.key)
    return npy, sidecar


def test_second_call_reads_the_cache(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path)
    encoder = CountingEncoder()
    first, stats1 = cache.encode(encoder, TEXTS, "passages")
    second, stats2 = cache.encode(encoder, TEXTS, "passages")
    assert (stats1.encoded, stats1.cached) == (len(TEXTS), 0)
    assert (stats2.encoded, stats2.cached) == (0, len(TEXTS))
    assert encoder.encoded == len(TEXTS)
    assert second.dtype == np.float32
    assert np.array_equal(first, second)
    assert np.array_equal(first, CountingEncoder().encode_passages(TEXTS))
    # a fresh cache object on the same folder (another job) also hits
    _, stats3 = EmbeddingCache(tmp_path).encode(CountingEncoder(), TEXTS, "passages")
    assert stats3.encoded == 0


def test_layout_and_sidecar(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path)
    encoder = CountingEncoder()
    array, stats = cache.encode(encoder, TEXTS, "queries")
    npy, sidecar = _files(cache, stats)
    assert npy == tmp_path / stats.key[:2] / f"{stats.key}.npy"
    meta = json.loads(sidecar.read_text(encoding="utf-8"))
    assert meta["shape"] == [len(TEXTS), 8]
    assert meta["dtype"] == "float32"
    assert meta["sha256"] == hashlib.sha256(npy.read_bytes()).hexdigest()
    assert meta["identity"] == encoder.identity()
    assert meta["role"] == "queries"
    assert meta["count"] == len(TEXTS)
    assert np.array_equal(np.load(npy, allow_pickle=False), array)
    leftovers = [p.name for p in npy.parent.iterdir() if p.suffix == ".tmp"]
    assert leftovers == []


def test_key_depends_on_identity_role_and_text_boundaries() -> None:
    ident = {"kind": "fake", "model": "a"}
    base = cache_key(ident, "passages", ["ab", "c"])
    assert base == cache_key({"model": "a", "kind": "fake"}, "passages", ["ab", "c"])
    assert base != cache_key({"kind": "fake", "model": "b"}, "passages", ["ab", "c"])
    assert base != cache_key(ident, "queries", ["ab", "c"])
    assert base != cache_key(ident, "passages", ["a", "bc"])
    assert base != cache_key(ident, "passages", ["abc"])
    assert base != cache_key(ident, "passages", ["c", "ab"])
    assert base != cache_key(ident, "passages", ["ab", "c", ""])


def test_different_identity_or_role_or_texts_encode_again(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path)
    _, s1 = cache.encode(CountingEncoder("m1"), TEXTS, "passages")
    _, s2 = cache.encode(CountingEncoder("m2"), TEXTS, "passages")
    q, s3 = cache.encode(CountingEncoder("m1"), TEXTS, "queries")
    _, s4 = cache.encode(CountingEncoder("m1"), TEXTS[:-1], "passages")
    assert len({s1.key, s2.key, s3.key, s4.key}) == 4
    assert [(s.encoded, s.cached) for s in (s1, s2, s3, s4)] == [
        (len(TEXTS), 0),
        (len(TEXTS), 0),
        (len(TEXTS), 0),
        (len(TEXTS) - 1, 0),
    ]
    assert np.array_equal(q, CountingEncoder().encode_queries(TEXTS))


def _corrupt_bytes(npy: Path, _sidecar: Path) -> None:
    data = bytearray(npy.read_bytes())
    data[-5:] = bytes(b ^ 0xFF for b in data[-5:])
    npy.write_bytes(bytes(data))


def _truncate(npy: Path, _sidecar: Path) -> None:
    data = npy.read_bytes()
    npy.write_bytes(data[: len(data) // 2])


def _drop_sidecar(_npy: Path, sidecar: Path) -> None:
    sidecar.unlink()


def _drop_npy(npy: Path, _sidecar: Path) -> None:
    npy.unlink()


def _garble_sidecar(_npy: Path, sidecar: Path) -> None:
    sidecar.write_text('{"shape": [5, 8], "dt', encoding="utf-8")


def _wrong_shape_in_sidecar(_npy: Path, sidecar: Path) -> None:
    meta = json.loads(sidecar.read_text(encoding="utf-8"))
    meta["shape"] = [5, 4]
    sidecar.write_text(json.dumps(meta), encoding="utf-8")


def _pickled_object_array(npy: Path, sidecar: Path) -> None:
    """A .npy that would need pickle to load, with a sidecar that matches it byte for byte."""
    objects = np.empty((5, 8), dtype=object)
    objects[:] = 0.0
    with npy.open("wb") as fh:
        np.save(fh, objects, allow_pickle=True)
    meta = json.loads(sidecar.read_text(encoding="utf-8"))
    meta["sha256"] = hashlib.sha256(npy.read_bytes()).hexdigest()
    sidecar.write_text(json.dumps(meta), encoding="utf-8")


@pytest.mark.parametrize(
    "damage",
    [
        _corrupt_bytes,
        _truncate,
        _drop_sidecar,
        _drop_npy,
        _garble_sidecar,
        _wrong_shape_in_sidecar,
        _pickled_object_array,
    ],
)
def test_damaged_entries_are_detected_and_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: Any
) -> None:
    cache = EmbeddingCache(tmp_path)
    original, stats = cache.encode(CountingEncoder(), TEXTS, "passages")
    npy, sidecar = _files(cache, stats)
    damage(npy, sidecar)

    encoder = CountingEncoder()
    with caplog.at_level(logging.WARNING, logger="retrieval_bench.encoders.cache"):
        rebuilt, stats2 = cache.encode(encoder, TEXTS, "passages")
    assert (stats2.encoded, stats2.cached) == (len(TEXTS), 0)
    assert np.array_equal(rebuilt, original)
    assert any("rebuilding" in r.getMessage() for r in caplog.records)
    # the rebuilt entry is whole again
    _, stats3 = cache.encode(encoder, TEXTS, "passages")
    assert (stats3.encoded, stats3.cached) == (0, len(TEXTS))
    meta = json.loads(sidecar.read_text(encoding="utf-8"))
    assert meta["sha256"] == hashlib.sha256(npy.read_bytes()).hexdigest()


def test_empty_text_list_and_bad_role(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path)
    array, stats = cache.encode(CountingEncoder(), [], "passages")
    assert array.shape == (0, 8)
    assert (stats.encoded, stats.cached) == (0, 0)
    with pytest.raises(ValueError, match="role"):
        cache.encode(CountingEncoder(), TEXTS, "documents")


def test_stats_add_up() -> None:
    total = CacheStats(encoded=3, cached=0) + CacheStats(encoded=0, cached=5)
    assert (total.encoded, total.cached) == (3, 5)


def _encode_in_child(root: str, texts: list[str], barrier: Any, results: Any) -> None:
    """One job of a sweep: wait for the other, then encode the same key at the same moment."""
    cache = EmbeddingCache(Path(root))
    encoder = CountingEncoder(delay=0.5)
    barrier.wait()
    array, stats = cache.encode(encoder, texts, "passages")
    results.put((stats.encoded, stats.cached, array.tobytes()))


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_two_processes_on_the_same_key(tmp_path: Path) -> None:
    # spawn, not fork: the test process may hold torch threads from other test modules
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    results = ctx.Queue()
    texts = [f"第{i}段：城市交通与天气。" for i in range(50)]
    workers = [
        ctx.Process(target=_encode_in_child, args=(str(tmp_path), texts, barrier, results))
        for _ in range(2)
    ]
    for worker in workers:
        worker.start()
    outcomes = [results.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0

    expected = CountingEncoder().encode_passages(texts)
    for _, _, data in outcomes:
        assert np.array_equal(
            np.frombuffer(data, dtype=np.float32).reshape(expected.shape), expected
        )
    # the lock made one job wait and read what the other wrote
    assert sorted((e, c) for e, c, _ in outcomes) == [(0, len(texts)), (len(texts), 0)]

    cache = EmbeddingCache(tmp_path)
    array, stats = cache.encode(CountingEncoder(), texts, "passages")
    assert stats.encoded == 0
    assert np.array_equal(array, expected)
    npy, _ = _files(cache, stats)
    assert not [p for p in npy.parent.iterdir() if p.suffix == ".tmp"]
