"""GPU check: passages/s of the project's BGE-M3 encoder path at BGE-M3's size, per length.

    .venv/bin/python benchmarks/bench_encode_gpu.py                # on a CUDA GPU, fp16
    .venv/bin/python benchmarks/bench_encode_gpu.py --tiny         # CPU smoke run, tiny model

A randomly initialised model with BGE-M3's layout and size (XLM-RoBERTa large: 24 layers,
hidden 1024, vocabulary 250,002, plus the colbert and sparse heads;
tests/support/random_models.py, the same builder the tests use for their tiny model) is saved
in a temporary folder and loaded through the project's own encoder (`build_encoder` with
`kind=bge_m3`, i.e. FlagEmbedding's BGEM3 model
as a job loads it), then encodes `--passages` passages at each length in fp16 on the GPU.
Every passage is longer than the length and cut to it by `max_length`, so each batch is exactly
that many tokens. Speed does not depend on the weights' values, so random weights measure what
the real model would. fp16 needs a GPU: without one the script refuses (exit 2) unless
`--tiny`, which runs the tests' tiny model in fp32 on the CPU to check the script itself.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import fields
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model is built here; nothing is downloaded
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# The random-weight model builder the tests use (tests/support/random_models.py).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.random_models import BGE_M3_SIZE, SAMPLE_SENTENCES, M3Shape, build_random_bge_m3

from retrieval_bench.config.encoder import BGE_M3_ENCODER
from retrieval_bench.encoders import EncoderConfig, build_encoder

TINY_SHAPE = M3Shape(hidden=32, layers=2, heads=2, intermediate=64, max_positions=514)
"""The tests' tiny model with room for 512 tokens."""


def encoder_config(model: Path, length: int, batch: int, fp16: bool, device: str) -> Any:
    """`kind=bge_m3` settings for this checkout's EncoderConfig (device/use_fp16 or
    devices/precision, whichever it has)."""
    names = {f.name for f in fields(EncoderConfig)}
    settings: dict[str, Any] = {"_target_": BGE_M3_ENCODER, "model": str(model)}
    settings.update(max_length=length, batch_size=batch)
    if "precision" in names:
        settings.update(precision="fp16" if fp16 else "fp32", devices=[device])
    else:
        settings.update(use_fp16=fp16, device=device)
    return EncoderConfig(**settings)


def long_texts(n: int, length: int) -> list[str]:
    """n distinct passages, each well over `length` tokens (cut to it by max_length)."""
    base = "".join(SAMPLE_SENTENCES)
    repeat = length // 40 + 2
    return [f"{i} " + base * repeat for i in range(n)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="128,256,512")
    parser.add_argument("--passages", type=int, default=2048, help="passages per length")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tiny", action="store_true", help="CPU smoke run: tiny model, fp32")
    args = parser.parse_args(argv)
    import torch

    lengths = [int(x) for x in args.lengths.split(",")]
    if args.tiny:
        shape, fp16, device, args.passages = TINY_SHAPE, False, "cpu", min(args.passages, 64)
    else:
        if not torch.cuda.is_available():
            print(
                "no CUDA GPU here: fp16 needs one. Run this on a GPU machine, or --tiny for a "
                "CPU smoke run of the script",
                file=sys.stderr,
            )
            return 2
        shape, fp16, device = BGE_M3_SIZE, True, args.device
    where = torch.cuda.get_device_name(device) if device.startswith("cuda") else "CPU"
    print(
        f"model: random XLM-RoBERTa, {shape.layers} layers, hidden {shape.hidden}, vocabulary "
        f"{shape.vocab_size or 'tokenizer'}, BGE-M3 heads; {'fp16' if fp16 else 'fp32'} on "
        f"{where}; torch {torch.__version__}"
    )
    with tempfile.TemporaryDirectory(prefix="bge-m3-sized-") as tmp:
        start = time.perf_counter()
        build_random_bge_m3(Path(tmp), shape, max_positions_ok(lengths, shape))
        print(f"built and saved in {time.perf_counter() - start:.1f}s")
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(tmp)
        for length in lengths:
            config = encoder_config(Path(tmp), length, args.batch_size, fp16, device)
            encoder = build_encoder(config)
            texts = long_texts(args.passages, length)
            shortest = min(len(tokenizer(t)["input_ids"]) for t in texts[:8])
            assert shortest > length, f"passages of {shortest} tokens do not fill {length}"
            encoder.encode_passages(texts[: args.batch_size])  # warm-up: load, kernels
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            start = time.perf_counter()
            vectors = encoder.encode_passages(texts)
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            seconds = time.perf_counter() - start
            assert vectors.shape == (len(texts), shape.hidden), vectors.shape
            rate = len(texts) / seconds
            print(
                f"RESULT encode_gpu length={length} passages={len(texts)} seconds={seconds:.2f} "
                f"passages_per_s={rate:.1f} minutes_per_million={1e6 / rate / 60:.1f} "
                f"precision={'fp16' if fp16 else 'fp32'} device={device}"
            )
    return 0


def max_positions_ok(lengths: list[int], shape: M3Shape) -> tuple[str, ...]:
    """The tokenizer's training sentences, after checking the model takes the longest length
    (XLM-R positions start after the padding index, hence + 2)."""
    if max(lengths) + 2 > shape.max_positions:
        raise SystemExit(f"lengths up to {shape.max_positions - 2} tokens for this model")
    return SAMPLE_SENTENCES


if __name__ == "__main__":
    raise SystemExit(main())
