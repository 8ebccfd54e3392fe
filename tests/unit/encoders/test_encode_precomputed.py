"""encoder=precomputed: vectors from files rank exactly as the encoder's own, and bad files are
refused at start, naming the file and counting what is wrong."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import compose_config, mini_overrides

from retrieval_bench.config import register_configs
from retrieval_bench.config.encoder import PRECOMPUTED, USE_ENCODER
from retrieval_bench.encoders import EncoderConfig, build_encoder, check_encoder_config
from retrieval_bench.encoders.cache import EmbeddingCache
from retrieval_bench.encoders.precomputed import load_precomputed
from retrieval_bench.errors import ConfigError, DataError
from retrieval_bench.job.runner import run_job
from retrieval_bench.records import passage_text

register_configs()


def _parquet(path: Path, ids: list[str], vectors: np.ndarray | list[list[float]]) -> Path:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rows = [list(map(float, v)) for v in vectors]
    pq.write_table(pa.table({"id": ids, "vector": rows}), path)
    return path


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_precomputed_vectors_rank_exactly_as_the_encoder(tmp_path: Path) -> None:
    encoded = run_job(compose_config([*mini_overrides(tmp_path), "retriever=dense"]))
    # The very vectors that job used, read back from its embedding cache.
    cache = EmbeddingCache(tmp_path / "cache" / "embeddings")
    use = build_encoder(EncoderConfig(_target_=USE_ENCODER))
    passages = encoded.dataset.passages
    passage_vectors = cache.lookup(use, [passage_text(p) for p in passages], "passages")
    texts = list(dict.fromkeys(q.query for q in encoded.dataset.queries))
    query_vectors = cache.lookup(use, texts, "queries")
    assert passage_vectors is not None and query_vectors is not None
    # passages as .npy + .txt ids in reversed order, queries as parquet keyed by query_id
    order = list(reversed(range(len(passages))))
    np.save(tmp_path / "p.npy", passage_vectors[order])
    (tmp_path / "p.txt").write_text("".join(passages[i].id + "\n" for i in order))
    row = {text: i for i, text in enumerate(texts)}
    queries = encoded.dataset.queries
    _parquet(
        tmp_path / "q.parquet",
        [q.query_id for q in queries],
        np.vstack([query_vectors[row[q.query]] for q in queries]).astype(np.float64),
    )
    precomputed = run_job(
        compose_config(
            [
                *mini_overrides(tmp_path / "pre"),
                "retriever=dense",
                "encoder=precomputed",
                f"encoder.path={tmp_path / 'p.npy'}",
                f"encoder.ids_path={tmp_path / 'p.txt'}",
                f"encoder.query_path={tmp_path / 'q.parquet'}",
            ]
        )
    )
    for a, b in zip(precomputed.records, encoded.records, strict=True):
        assert a.stages["dense"].ids == b.stages["dense"].ids
        assert a.stages["dense"].scores == b.stages["dense"].scores
    assert precomputed.metrics["stages"] == encoded.metrics["stages"]
    assert precomputed.embeddings["passages"]["precomputed"] == len(passages)
    assert not (tmp_path / "pre" / "cache" / "embeddings").exists() or not list(
        (tmp_path / "pre" / "cache" / "embeddings").rglob("*.npy")
    ), "nothing was encoded"


IDS = ["a", "b", "c"]
QUERIES = [("q1", "first query"), ("q2", "second query")]


def _unit_rows(n: int, dim: int = 4, seed: int = 0) -> np.ndarray:
    rows = np.random.default_rng(seed).normal(size=(n, dim))
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def _files(
    tmp_path: Path,
    passage_ids: list[str] | None = None,
    passages: np.ndarray | None = None,
    queries: np.ndarray | None = None,
    **overrides: object,
) -> EncoderConfig:
    ids = IDS if passage_ids is None else passage_ids
    np.save(tmp_path / "p.npy", _unit_rows(len(ids)) if passages is None else passages)
    (tmp_path / "p.json").write_text(json.dumps(ids))
    np.save(tmp_path / "q.npy", _unit_rows(2, seed=1) if queries is None else queries)
    (tmp_path / "q.txt").write_text("q1\nq2\n")
    fields: dict[str, object] = {
        "_target_": PRECOMPUTED,
        "path": str(tmp_path / "p.npy"),
        "ids_path": str(tmp_path / "p.json"),
        "query_path": str(tmp_path / "q.npy"),
        "query_ids_path": str(tmp_path / "q.txt"),
        "normalize": False,
        **overrides,
    }
    cfg = EncoderConfig(**fields)  # type: ignore[arg-type]
    cfg.validate()
    return cfg


def test_good_files_load_in_corpus_order(tmp_path: Path) -> None:
    passages = _unit_rows(3)
    cfg = _files(tmp_path, ["c", "a", "b"], passages)
    loaded = load_precomputed(cfg, IDS, QUERIES)
    np.testing.assert_array_equal(loaded.passages, passages[[1, 2, 0]].astype(np.float32))
    assert loaded.passages.dtype == np.float32
    np.testing.assert_array_equal(
        loaded.encode_queries(["second query", "first query"]),
        _unit_rows(2, seed=1)[[1, 0]].astype(np.float32),
    )


@pytest.mark.parametrize(
    ("passage_ids", "passages", "queries", "words"),
    [
        (["a", "b"], _unit_rows(2), None, "1 corpus passages have no vector here: 'c'"),
        (["a", "b", "c", "x", "y"], _unit_rows(5), None, "2 ids are not corpus passages"),
        (["a", "b", "c", "a"], _unit_rows(4), None, "1 ids appear more than once: 'a'"),
        (None, _unit_rows(2), None, "2 rows but 3 ids"),
        (None, np.where(np.eye(3, 4) == 1, np.nan, 0.5), None, "3 vectors hold NaN or infinity"),
        (None, _unit_rows(3) * 2, None, "3 vectors are not unit-norm"),
        (None, np.zeros((3, 4)), None, "3 vectors are all zeros"),
        (None, None, _unit_rows(2, dim=5), "query vectors have dimension 5, passage vectors 4"),
        (None, np.ones(3), None, "must be a 2-D matrix"),
        (None, np.eye(3, 4, dtype=np.int64), None, "must hold floats"),
    ],
)
def test_bad_vector_files_are_refused_naming_the_file(
    tmp_path: Path,
    passage_ids: list[str] | None,
    passages: np.ndarray | None,
    queries: np.ndarray | None,
    words: str,
) -> None:
    cfg = _files(tmp_path, passage_ids, passages, queries)
    with pytest.raises(DataError) as err:
        load_precomputed(cfg, IDS, QUERIES)
    assert words in str(err.value)
    assert str(tmp_path) in str(err.value)


def test_non_unit_vectors_are_normalised_when_asked(tmp_path: Path) -> None:
    cfg = _files(tmp_path, passages=_unit_rows(3) * 3, normalize=True)
    loaded = load_precomputed(cfg, IDS, QUERIES)
    np.testing.assert_allclose(np.linalg.norm(loaded.passages, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(loaded.passages, _unit_rows(3), atol=1e-6)


def test_query_ids_must_match_the_evaluation_set(tmp_path: Path) -> None:
    cfg = _files(tmp_path)
    with pytest.raises(DataError) as err:
        load_precomputed(cfg, IDS, [*QUERIES, ("q3", "third")])
    assert "1 query ids have no vector here: 'q3'" in str(err.value)
    with pytest.raises(DataError) as err:
        load_precomputed(cfg, IDS, QUERIES[:1])
    assert "1 ids are not query ids of this dataset: 'q2'" in str(err.value)


@pytest.mark.parametrize(
    ("overrides", "key", "words"),
    [
        ({"query_path": ""}, "encoder.query_path", "needs query vectors too"),
        ({"ids_path": ""}, "encoder.ids_path", "holds no ids"),
        ({"path": "/nowhere/p.npy"}, "encoder.path", "no vector file at /nowhere/p.npy"),
        ({"query_ids_path": "/nowhere/q.txt"}, "encoder.query_ids_path", "no ids file"),
    ],
)
def test_missing_files_name_their_key(
    tmp_path: Path, overrides: dict[str, object], key: str, words: str
) -> None:
    cfg = _files(tmp_path, **overrides)
    with pytest.raises(ConfigError) as err:
        load_precomputed(cfg, IDS, QUERIES)
    assert err.value.key == key
    assert words in str(err.value)


def test_config_needs_a_path_and_no_shards() -> None:
    for fields, key in (
        ({"_target_": PRECOMPUTED}, "encoder.path"),
        ({"_target_": PRECOMPUTED, "path": "p.npy", "shards": 2}, "encoder.shards"),
        ({"_target_": PRECOMPUTED, "path": "p.npy", "precision": "fp16"}, "encoder.precision"),
    ):
        with pytest.raises(ConfigError) as err:
            check_encoder_config(EncoderConfig(**fields))  # type: ignore[arg-type]
        assert err.value.key == key


def test_parquet_ragged_vectors_and_missing_pyarrow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _parquet(tmp_path / "p.parquet", IDS, [[1.0, 0.0], [0.0, 1.0], [1.0, 0.0, 0.0]])
    cfg = _files(tmp_path, path=str(path), ids_path="")
    with pytest.raises(DataError) as err:
        load_precomputed(cfg, IDS, QUERIES)
    assert "different dimensions: id 'a' has 2, id 'c' has 3" in str(err.value)
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    monkeypatch.setitem(sys.modules, "pyarrow.compute", None)
    with pytest.raises(ConfigError) as err:
        load_precomputed(cfg, IDS, QUERIES)
    assert err.value.key == "encoder.path"
    assert "needs pyarrow: pip install pyarrow" in str(err.value)
