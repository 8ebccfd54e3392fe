"""Dense retrieval at 10M passages on one machine: fp16 vectors memory-mapped from disk, IVF-PQ.

    .venv/bin/python benchmarks/bench_dense_scale.py --sizes 1000000,10000000   # ~1 h at 10M
    .venv/bin/python benchmarks/bench_dense_scale.py --sizes 1000000            # ~5 min
    .venv/bin/python benchmarks/bench_dense_scale.py --quick                    # 20,000, smoke

Per size, in this order, each step timed and its memory sampled (RSS split into anonymous
memory, what the process really holds, and file pages of the memory-mapped vectors, which the
kernel can drop at any time):

1. vectors: `--dim`-d (default 384, BGE-small / MiniLM size) unit vectors as float16 in a `.npy`
   under `--workdir` (reused when there), written in chunks: points around 4,096 Gaussian
   anchors with per-point noise, so neighbourhoods have structure; queries are passages plus
   noise. Memory-mapped from then on: no step holds the matrix.
2. exact: the true top 10 of `--sample` queries by a chunked scan of the memory-mapped matrix
   (float16 -> float32 per chunk), what recall is measured against.
3. index: FAISS `IVF<nlist>_HNSW32,PQ<m>x4fs` (inner product; nlist ~ sqrt(n) rounded to a
   power of two, an HNSW graph over the centroids so assigning ten million vectors is not a
   scan of every centroid; `--pq-m` 4-bit sub-quantizers, FAISS's fast-scan layout: m / 2
   bytes per vector, 480 MB at 10M x 96), trained on 64 vectors per list (at least 10,000),
   then filled chunk by chunk from the memory map, and written beside the vectors
   (`index-<n>x<dim>-<factory>.faiss`), which a later run with the same vectors reads back
   instead of building (39 minutes at 10M under load). (Plain 8-bit `PQ<m>` in an IVF index
   trains polysemous codes by default: 40 s for 10,000 64-d vectors here, against 0.3 s for
   x4fs.)
4. search: every query's top `--rerank` by PQ distance, re-ranked by exact inner products read
   back from the memory map (float16 on disk, the only full-precision copy), top 10 kept.
   nprobe is raised through `--nprobe` values, at each `--rerank` depth in turn (200, then
   1,000, then 2,000), until recall@10 against exact on the sample reaches `--min-recall`; the
   first that does is timed over all `--queries`. At 10M x 96 4-bit codes, 2,441 vectors around
   each anchor are closer together than PQ can tell apart: the top 200 by PQ held 0.7635 of the
   true top 10 at every nprobe from 8 to 256, so depth, not nprobe, is what recall needs there.
   A configuration that reaches it nowhere says so, with the best recall it got, and the
   script exits 1.

Prints `RESULT dense_scale ...` per size and step (wall s, peak anonymous and file RSS), the
growth from the previous size per step, and the target check (recall@10 >= 0.9, peak memory
<= 16 GB: anonymous plus file pages, an upper bound).
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

CHUNK = 262_144
ANCHORS = 4096
TARGET_RECALL = 0.9
TARGET_GIB = 16.0


def rss() -> tuple[int, int]:
    """(anonymous, file-backed) resident bytes of this process (/proc/self/status)."""
    fields = {}
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(("RssAnon:", "RssFile:", "RssShmem:")):
                name, value = line.split(":")
                fields[name] = int(value.split()[0]) * 1024
    return fields.get("RssAnon", 0), fields.get("RssFile", 0) + fields.get("RssShmem", 0)


@contextmanager
def metered(record: dict[str, Any], step: str) -> Iterator[None]:
    """Wall time and the peak of each kind of RSS while the block runs (sampled 20 times a
    second), stored as record[step]."""
    peak = list(rss())
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.05):
            anon, file = rss()
            peak[0], peak[1] = max(peak[0], anon), max(peak[1], file)

    watcher = threading.Thread(target=sample, daemon=True)
    watcher.start()
    start = time.perf_counter()
    try:
        yield
    finally:
        done.set()
        watcher.join()
        anon, file = rss()
        record[step] = {
            "wall_s": time.perf_counter() - start,
            "anon_gib": max(peak[0], anon) / 2**30,
            "file_gib": max(peak[1], file) / 2**30,
        }
        row = record[step]
        print(
            f"  {step:<8} {row['wall_s']:8.1f} s   peak anonymous {row['anon_gib']:6.2f} GiB, "
            f"file {row['file_gib']:6.2f} GiB",
            flush=True,
        )


def write_vectors(path: Path, n: int, dim: int, seed: int = 0) -> None:
    """n unit vectors around ANCHORS Gaussian anchors, float16, chunk by chunk."""
    rng = np.random.default_rng(seed)
    anchors = rng.standard_normal((ANCHORS, dim)).astype(np.float32)
    anchors /= np.linalg.norm(anchors, axis=1, keepdims=True)
    tmp = path.with_suffix(".tmp.npy")
    out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float16, shape=(n, dim))
    for start in range(0, n, CHUNK):
        rows = min(CHUNK, n - start)
        centre = anchors[rng.integers(0, ANCHORS, rows)]
        spread = rng.uniform(0.3, 0.8, (rows, 1)).astype(np.float32)
        block = centre + spread * rng.standard_normal((rows, dim)).astype(np.float32) / math.sqrt(
            dim
        )
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        out[start : start + rows] = block
    out.flush()
    del out
    os.replace(tmp, path)


def chunks(matrix: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """(start, float32 copy) of each CHUNK rows of a memory-mapped float16 matrix."""
    for start in range(0, len(matrix), CHUNK):
        yield start, np.asarray(matrix[start : start + CHUNK], dtype=np.float32)


def exact_top(matrix: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    """The true top k (inner product) of each query, by one chunked scan."""
    best_ids = np.zeros((len(queries), 0), dtype=np.int64)
    best_scores = np.zeros((len(queries), 0), dtype=np.float32)
    for start, block in chunks(matrix):
        scores = queries @ block.T
        ids = np.broadcast_to(np.arange(start, start + len(block)), scores.shape)
        scores = np.concatenate([best_scores, scores], axis=1)
        ids = np.concatenate([best_ids, ids], axis=1)
        keep = np.argpartition(-scores, min(k, scores.shape[1] - 1), axis=1)[:, :k]
        best_scores = np.take_along_axis(scores, keep, axis=1)
        best_ids = np.take_along_axis(ids, keep, axis=1)
    order = np.argsort(-best_scores, axis=1, kind="stable")
    return np.take_along_axis(best_ids, order, axis=1)


def rerank(matrix: np.ndarray, queries: np.ndarray, candidates: np.ndarray, k: int) -> np.ndarray:
    """Each query's candidates (-1: none) re-scored exactly from the memory map, top k."""
    out = np.full((len(queries), k), -1, dtype=np.int64)
    for i, (query, ids) in enumerate(zip(queries, candidates, strict=True)):
        ids = ids[ids >= 0]
        if not len(ids):
            continue
        order = np.sort(ids)  # ascending reads from the memory map
        scores = np.asarray(matrix[order], dtype=np.float32) @ query
        top = order[np.argsort(-scores, kind="stable")[:k]]
        out[i, : len(top)] = top
    return out


def recall_at(found: np.ndarray, truth: np.ndarray) -> float:
    hits = [
        len(set(f[f >= 0].tolist()) & set(t.tolist())) / len(t)
        for f, t in zip(found, truth, strict=True)
    ]
    return float(np.mean(hits))


def run_size(args: argparse.Namespace, n: int) -> dict[str, Any]:
    # OpenMP threads that spin while waiting slow to a crawl on a shared, loaded machine.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import faiss

    faiss.omp_set_num_threads(args.threads)
    record: dict[str, Any] = {"n": n}
    path = args.workdir / f"vectors-{n}x{args.dim}-fp16.npy"
    print(f"\n== {n:,} passages x {args.dim}-d float16 ({path})", flush=True)
    with metered(record, "vectors"):
        if not path.exists():
            args.workdir.mkdir(parents=True, exist_ok=True)
            write_vectors(path, n, args.dim)
        matrix = np.load(path, mmap_mode="r")
    rng = np.random.default_rng(1)
    picked = np.sort(rng.choice(n, args.queries, replace=False))
    queries = np.asarray(matrix[picked], dtype=np.float32)
    queries += 0.5 * rng.standard_normal(queries.shape).astype(np.float32) / math.sqrt(args.dim)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    sample = queries[: args.sample]
    with metered(record, "exact"):
        truth = exact_top(matrix, sample, 10)
    nlist = 1 << max(6, round(math.log2(math.sqrt(n))))
    factory = args.index.format(nlist=nlist, m=args.pq_m)
    # The filled index is kept beside the vectors and read back by a later run with the same
    # vectors and factory (at 10M its build is most of the run: 39 minutes at load 7).
    saved = args.workdir / f"index-{n}x{args.dim}-{factory.replace(',', '_')}.faiss"
    with metered(record, "index"):
        train = np.sort(rng.choice(n, min(n, max(64 * nlist, 10_000)), replace=False))
        if saved.exists():
            index = faiss.read_index(str(saved))
            record["index_reused"] = True
        else:
            index = faiss.index_factory(args.dim, factory, faiss.METRIC_INNER_PRODUCT)
            # 64 per list for k-means, and at least the 39 x 256 points PQ's codebooks ask for.
            index.train(np.asarray(matrix[train], dtype=np.float32))
            for _, block in chunks(matrix):
                index.add(block)
            partial = saved.with_suffix(".partial")
            faiss.write_index(index, str(partial))
            os.replace(partial, saved)
    record["factory"] = factory
    record["index_gib"] = faiss.serialize_index(index).nbytes / 2**30 if n <= 2_000_000 else None
    ivf = faiss.extract_index_ivf(index)
    reached = None
    best = (0.0, 0)
    best_depth = args.rerank[0]
    with metered(record, "tune"):
        # The cheapest first: every nprobe at the shallowest re-rank depth, then deeper ones.
        for depth, nprobe in itertools.product(args.rerank, args.nprobe):
            ivf.nprobe = nprobe
            _, candidates = index.search(sample, depth)
            recall = recall_at(rerank(matrix, sample, candidates, 10), truth)
            print(
                f"    nprobe {nprobe:>4}, re-rank {depth:>5}: recall@10 against exact {recall:.4f}",
                flush=True,
            )
            if (recall, -nprobe) > (best[0], -best[1]):
                best, best_depth = (recall, nprobe), depth
            if recall >= args.min_recall:
                reached = (nprobe, recall)
                break
    record["recall"], record["nprobe"] = best
    record["rerank"] = best_depth
    record["reached"] = reached is not None
    if reached is not None:
        ivf.nprobe = reached[0]
        with metered(record, "search"):
            _, candidates = index.search(queries, record["rerank"])
            rerank(matrix, queries, candidates, 10)
        record["ms_per_query"] = record["search"]["wall_s"] / len(queries) * 1e3
    return record


STEPS = ("vectors", "exact", "index", "tune", "search")


def report(records: list[dict[str, Any]], args: argparse.Namespace) -> int:
    print()
    for r in records:
        for step in STEPS:
            if step in r:
                row = r[step]
                print(
                    f"RESULT dense_scale passages={r['n']} step={step} wall_s={row['wall_s']:.1f} "
                    f"anon_gib={row['anon_gib']:.2f} file_gib={row['file_gib']:.2f}"
                )
    for lo, hi in itertools.pairwise(records):
        for step in STEPS:
            if step in lo and step in hi:
                growth = hi[step]["wall_s"] / max(lo[step]["wall_s"], 1e-9)
                memory = hi[step]["anon_gib"] / max(lo[step]["anon_gib"], 1e-9)
                exponent = math.log(growth) / math.log(hi["n"] / lo["n"])
                print(
                    f"RESULT dense_scale growth from={lo['n']} to={hi['n']} step={step} "
                    f"wall_ratio={growth:.2f} (n^{exponent:.2f}) anon_ratio={memory:.2f}"
                )
    status = 0
    for r in records:
        peak = max(r[s]["anon_gib"] + r[s]["file_gib"] for s in STEPS if s in r)
        anon = max(r[s]["anon_gib"] for s in STEPS if s in r)
        line = (
            f"RESULT dense_scale passages={r['n']} index={r['factory']} rerank={r['rerank']} "
            f"peak_anon_gib={anon:.2f} peak_rss_gib={peak:.2f}"
        )
        if r["reached"]:
            line += (
                f" nprobe={r['nprobe']} recall@10={r['recall']:.4f} "
                f"ms_per_query={r['ms_per_query']:.2f} met="
                f"{'yes' if r['recall'] >= TARGET_RECALL and peak <= TARGET_GIB else 'no'}"
            )
        else:
            status = 1
            line += (
                f" cannot reach recall@10 {args.min_recall}: best {r['recall']:.4f} at nprobe "
                f"{r['nprobe']} (raise --nprobe, --rerank or --pq-m)"
            )
        print(line)
    load = os.getloadavg()
    print(f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return status


def positive_ints(text: str) -> list[int]:
    """A comma-separated list of positive integers (`--nprobe 8,16`, `--rerank 200,1000`),
    refused by argparse with the option's name otherwise."""
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers >= 1")
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000000,10000000")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--sample", type=int, default=200, help="queries with an exact top 10")
    parser.add_argument("--index", default="IVF{nlist}_HNSW32,PQ{m}x4fs")
    parser.add_argument("--pq-m", type=int, default=96, help="PQ sub-quantizers ({m})")
    parser.add_argument(
        "--rerank",
        type=positive_ints,
        default="200,1000,2000",
        help="PQ candidates re-ranked by exact inner products: depths tried in order",
    )
    parser.add_argument("--nprobe", type=positive_ints, default="8,16,32,64,128,256")
    parser.add_argument("--min-recall", type=float, default=TARGET_RECALL)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/retrieval-bench-dense"))
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="FAISS threads")
    parser.add_argument("--quick", action="store_true", help="20,000 passages, 64-d")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.dim, args.queries, args.sample, args.pq_m = "20000", 64, 100, 50, 32
    load = os.getloadavg()
    print(
        f"machine: {os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} "
        f"{load[2]:.2f}; workdir {args.workdir}"
    )
    records = [run_size(args, int(n)) for n in args.sizes.split(",")]
    return report(records, args)


if __name__ == "__main__":
    sys.exit(main())
