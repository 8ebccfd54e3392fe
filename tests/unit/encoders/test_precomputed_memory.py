"""Precomputed passage vectors are loaded without copies of the whole matrix: at a million
512-d passages each copy is 2 GB (4 GB in float64), and four of them made the load phase of the
end-to-end benchmark peak at 12 GiB (BENCHMARKS.md, End to end at 1M)."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np

from retrieval_bench.config.encoder import PRECOMPUTED, EncoderConfig
from retrieval_bench.encoders.precomputed import load_precomputed


def test_unit_vectors_in_corpus_order_load_without_copying_the_matrix(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    passages = rng.standard_normal((30_000, 256)).astype(np.float32)
    passages /= np.linalg.norm(passages, axis=1, keepdims=True)
    queries = passages[:3] + 0.0
    ids = [f"p{i}" for i in range(len(passages))]
    np.save(tmp_path / "p.npy", passages)
    np.save(tmp_path / "q.npy", queries)
    (tmp_path / "p.txt").write_text("\n".join(ids) + "\n")
    (tmp_path / "q.txt").write_text("q0\nq1\nq2\n")
    cfg = EncoderConfig(
        _target_=PRECOMPUTED,
        path=str(tmp_path / "p.npy"),
        ids_path=str(tmp_path / "p.txt"),
        query_path=str(tmp_path / "q.npy"),
        query_ids_path=str(tmp_path / "q.txt"),
    )
    tracemalloc.start()
    loaded = load_precomputed(cfg, ids, [("q0", "a"), ("q1", "b"), ("q2", "c")])
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert np.array_equal(loaded.passages, passages)  # the rows, bit for bit
    # The matrix read from the file, float64 norms by blocks of rows, per-id bookkeeping: under
    # two copies of the matrix (it was over four: a float32 copy, a reordered one, a float64 one).
    assert peak < 2 * passages.nbytes, f"peak {peak / passages.nbytes:.2f}x the matrix"
