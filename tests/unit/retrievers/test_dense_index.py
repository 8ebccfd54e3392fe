"""The dense index factory: approximate indexes, their filters, recall against exact, errors."""

from __future__ import annotations

import json
from pathlib import Path

import faiss
import numpy as np
import pytest
from conftest import mini_overrides, run_in_process

from retrieval_bench.errors import ConfigError
from retrieval_bench.retrievers import dense_index
from retrieval_bench.retrievers.dense import DenseRetriever
from retrieval_bench.retrievers.dense_index import DenseIndexConfig, build_index


def unit_rows(rng: np.random.Generator, n: int, dim: int = 16) -> np.ndarray:
    rows = rng.normal(size=(n, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def clustered(seed: int, n: int = 2000, dim: int = 16) -> np.ndarray:
    """Vectors around 20 centres: the structure IVF and HNSW are built for."""
    rng = np.random.default_rng(seed)
    centres = unit_rows(rng, 20, dim)
    rows = centres[rng.integers(0, 20, n)] + 0.3 * rng.normal(size=(n, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def retriever(vectors: np.ndarray, queries: np.ndarray, **config: object) -> DenseRetriever:
    ids = [f"p{i:05d}" for i in range(len(vectors))]
    return DenseRetriever(
        ids, vectors, lambda texts: queries[: len(texts)], DenseIndexConfig(**config)
    )


def pools(r: DenseRetriever, n: int, k: int, mask: np.ndarray | None = None) -> list[list[int]]:
    return [p.indices.tolist() for p in r.search([str(i) for i in range(n)], k, [mask] * n)]


@pytest.mark.parametrize("factory", ["IVF8,Flat", "IVF8,SQ8"])
def test_ivf_probing_every_list_equals_exact_with_and_without_filter(factory: str) -> None:
    vectors = clustered(0)
    queries = clustered(1, n=30)
    exact = retriever(vectors, queries)
    approx = retriever(vectors, queries, index=factory, nprobe=8)
    mask = np.random.default_rng(2).random(len(vectors)) < 0.3
    if factory == "IVF8,Flat":
        assert pools(approx, 30, 10) == pools(exact, 30, 10)
        assert pools(approx, 30, 10, mask) == pools(exact, 30, 10, mask)
    for pool in pools(approx, 30, 10, mask):
        assert len(pool) == 10 and mask[pool].all(), "the selector filters before ranking"
    info = approx.index_info()
    assert info["factory"] == factory and info["exact"] is False and info["nprobe"] == 8
    assert info["recall_queries"] == (90 if factory == "IVF8,Flat" else 30)
    assert info["recall_vs_exact@10"] == pytest.approx(1.0, abs=0.05)


def test_recall_vs_exact_is_measured_and_below_one_for_a_coarse_index() -> None:
    vectors = clustered(3, n=3000)
    queries = clustered(4, n=50)
    approx = retriever(vectors, queries, index="IVF64,Flat", nprobe=1)
    found = pools(approx, 50, 10)
    truth = pools(retriever(vectors, queries), 50, 10)
    expected = np.mean([len(set(a) & set(e)) / len(e) for a, e in zip(found, truth, strict=True)])
    recall = approx.index_info()["recall_vs_exact@10"]
    assert recall == pytest.approx(expected)
    assert recall == pytest.approx(0.258, abs=1e-12), "one probed list of 64 misses most"


def test_hnsw_respects_filters_and_reports_recall() -> None:
    vectors = clustered(5)
    queries = clustered(6, n=20)
    approx = retriever(vectors, queries, index="HNSW16", ef_search=64)
    mask = np.zeros(len(vectors), dtype=bool)
    mask[::7] = True
    for pool in pools(approx, 20, 10, mask):
        assert len(pool) == 10 and mask[pool].all()
    info = approx.index_info()
    assert info["ef_search"] == 64 and info["recall_vs_exact@10"] == pytest.approx(0.96)


def test_exact_flat_reports_no_recall_and_keeps_no_second_index() -> None:
    vectors = clustered(7, n=100)
    flat = retriever(vectors, vectors)
    pools(flat, 5, 10)
    info = flat.index_info()
    assert info["exact"] is True and "recall_vs_exact@10" not in info
    assert flat.exact_index is None
    off = retriever(vectors, vectors, index="HNSW8", recall_vs_exact=False)
    pools(off, 5, 10)
    assert off.exact_index is None and "recall_vs_exact@10" not in off.index_info()


def test_index_without_selector_support_refuses_filters_but_serves_unfiltered() -> None:
    vectors = clustered(8, n=640)
    pq = retriever(vectors, vectors, index="PQ4x4")  # 16 centroids per sub-quantizer: fast
    assert len(pools(pq, 3, 5)[0]) == 5
    with pytest.raises(ConfigError, match="id selectors"):
        pools(pq, 3, 5, np.ones(len(vectors), dtype=bool))


@pytest.mark.parametrize("factory", ["PQ2x4", "IVF2,PQ2x4", "OPQ2,PQ2x4", "IVF2,PQ2x4,RFlat"])
def test_pq_indexes_skip_polysemous_training_and_rank_as_with_it(
    factory: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Polysemous training (FAISS's default for PQ) renumbers centroids for a Hamming search
    the arm never runs: without it the arm returns the same ids, and the same scores to float32
    rounding (a centroid's place in the BLAS product that scores it moves with its number)."""
    vectors = clustered(11, n=400)
    config = {"index": factory, "nprobe": 2, "recall_vs_exact": False}
    arm = retriever(vectors, vectors, **config)
    built = faiss.downcast_index(arm.index.index)
    flags = []
    while built is not None:
        if hasattr(built, "do_polysemous_training"):
            flags.append(built.do_polysemous_training)
        inner = getattr(built, "index", None) or getattr(built, "base_index", None)
        built = None if inner is None else faiss.downcast_index(inner)
    assert flags == [False], "the PQ codes inside every wrapper"

    monkeypatch.setattr(dense_index, "without_polysemous_training", lambda index: None)
    dense_index._MEMO.clear()
    default = retriever(vectors, vectors, **config)  # FAISS's default: polysemous training
    assert faiss.downcast_index(default.index.index).__class__ is type(arm.index.index)
    ours, theirs = (r.search([str(i) for i in range(40)], 10, [None] * 40) for r in (arm, default))
    assert [p.indices.tolist() for p in ours] == [p.indices.tolist() for p in theirs]
    np.testing.assert_allclose(
        np.stack([p.scores for p in ours]), np.stack([p.scores for p in theirs]), rtol=0, atol=1e-6
    )


def test_a_refined_index_takes_its_base_parameters_and_the_filter() -> None:
    """`IVF...,RFlat`: nprobe and the selector go to the IVF base inside the refinement's own
    parameters (FAISS refuses bare IVF ones), and the refined scores are exact."""
    vectors = clustered(12, n=600)
    queries = clustered(13, n=20)
    arm = retriever(vectors, queries, index="IVF4,PQ4x4,RFlat", nprobe=4, recall_vs_exact=False)
    mask = np.zeros(len(vectors), dtype=bool)
    mask[::3] = True
    for row, pool in enumerate(arm.search([str(i) for i in range(20)], 10, [mask] * 20)):
        assert len(pool.indices) == 10 and mask[pool.indices].all()
        exact = vectors[pool.indices] @ queries[row]
        np.testing.assert_allclose(pool.scores, exact, rtol=1e-5)
    assert len(pools(arm, 20, 10)[0]) == 10


def test_bad_factory_strings_and_untrainable_indexes_name_the_key() -> None:
    vectors = clustered(9, n=50)
    with pytest.raises(ConfigError, match=r"dense\.index.*could not parse"):
        retriever(vectors, vectors, index="NoSuchIndex")
    with pytest.raises(ConfigError, match=r"dense\.index.*training"):
        retriever(vectors, vectors, index="IVF256,Flat")
    for bad in ({"nprobe": 0}, {"ef_search": 0}, {"index": " "}, {"train_size": -1}):
        with pytest.raises(ConfigError):
            DenseIndexConfig(**bad).validate()  # type: ignore[arg-type]


def test_built_index_is_reused_within_the_process_for_the_same_vectors() -> None:
    vectors = clustered(10, n=500)
    first = build_index(vectors, DenseIndexConfig(index="IVF4,Flat"), key="k-test")
    again = build_index(vectors, DenseIndexConfig(index="IVF4,Flat", nprobe=2), key="k-test")
    assert again.index is first.index, "trained once per process"
    assert again.reused and not first.reused
    assert again.config.nprobe == 2, "search-time settings come from the new job"
    other = build_index(vectors, DenseIndexConfig(index="IVF4,Flat"), key="k-other")
    assert other.index is not first.index


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_job_records_the_dense_index_in_the_manifest(tmp_path: Path) -> None:
    overrides = [*mini_overrides(tmp_path), "retriever=dense", "arms.dense.index=HNSW8"]
    _, run_dir = run_in_process(overrides, tmp_path)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    info = manifest["arms"]["dense"]
    assert info["factory"] == "HNSW8" and info["exact"] is False
    # 12 passages: the graph reaches every one, so it finds what exact search finds.
    assert info["recall_vs_exact@10"] == 1.0 and info["recall_queries"] == 9


def test_training_on_a_sample_still_serves_every_passage() -> None:
    vectors = clustered(11, n=1500)
    approx = retriever(vectors, vectors[:20], index="IVF8,Flat", nprobe=8, train_size=300)
    assert approx.index.ntotal == 1500
    assert pools(approx, 20, 1) == [[i] for i in range(20)], "each passage finds itself"
