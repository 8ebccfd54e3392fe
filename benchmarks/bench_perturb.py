"""Perturbing the same queries again in one process: text results kept against rebuilt.

    .venv/bin/python benchmarks/bench_perturb.py               # travel, every kind, 5 rounds
    .venv/bin/python benchmarks/bench_perturb.py --rounds 1    # the smoke run

Why: a process perturbs the same queries more than once. Each job of an in-process robustness
sweep does, and `run.compare --judged-labels` scores each job under three label sets. The
per-text work (pypinyin's readings, jieba's words, the romanised entity names) is kept per text
(`functools.lru_cache` in `perturb.homophone`, `perturb.spacing`, `perturb.mixed_script`). Each
round perturbs the shipped travel set with every kind twice. One pass is timed with those caches
emptied first, which is what every pass cost before. The other is timed with them kept, and its
variants must equal the emptied pass's. The tables every pass shares (the homophone table,
jieba, OpenCC) are loaded before timing, so only the per-text work differs.
RESULT: the rebuilt pass's median time over the kept one's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import add_rounds, timed

from retrieval_bench.config.robustness import KINDS, RobustnessConfig
from retrieval_bench.data.evalset import load_evalset
from retrieval_bench.data.passages import load_lexicon
from retrieval_bench.perturb.dataset import settings_of
from retrieval_bench.perturb.evalset import perturb_queries
from retrieval_bench.perturb.homophone import readings
from retrieval_bench.perturb.kinds import build_kinds
from retrieval_bench.perturb.mixed_script import romanise
from retrieval_bench.perturb.spacing import jieba_words
from retrieval_bench.records import EvalQuery

ROOT = Path(__file__).resolve().parents[1]
KEPT_PER_TEXT = (readings, jieba_words, romanise)
SEED = 7


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_rounds(parser, 5)
    rounds = parser.parse_args(argv).rounds
    queries = load_evalset(ROOT / "evalsets" / "travel.jsonl")
    entities = load_lexicon(ROOT / "corpus" / "travel" / "lexicon.jsonl")
    config = RobustnessConfig(kinds=list(KINDS))
    kinds = build_kinds(config.kinds, settings_of(config, entities), "robustness.kinds")

    def perturb() -> list[EvalQuery]:
        return perturb_queries(queries, kinds, SEED)[0]

    perturb()  # the shared tables, loaded once as in any process
    seconds: dict[str, list[float]] = {"rebuilt": [], "kept": []}
    variants = 0
    for _ in range(rounds):
        for cached in KEPT_PER_TEXT:
            cached.cache_clear()
        rebuilt, elapsed = timed(perturb)
        seconds["rebuilt"].append(elapsed)
        kept, elapsed = timed(perturb)
        seconds["kept"].append(elapsed)
        assert kept == rebuilt, "the kept per-text results made other variants"
        variants = len(kept)
    slow, fast = (statistics.median(seconds[side]) for side in ("rebuilt", "kept"))
    print(f"travel: {len(queries)} queries x {len(KINDS)} kinds, {rounds} round(s), median s")
    print(f"per-text work rebuilt {slow:.3f}  kept {fast:.3f}")
    print(
        f"RESULT perturb: {variants} variants identical; rebuilt {slow:.3f} s, "
        f"kept {fast:.3f} s = {slow / fast:.1f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
