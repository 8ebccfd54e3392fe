"""`python -m run.rescore JOB_OR_MONTH_DIR [--evalset PATH]`: re-score stored rankings.

Every finished job at or under the folder (a job, a sweep or a benchmark month) is scored
again from its rankings.jsonl against its dataset's current labels (or the label snapshot
`--evalset`), without retrieving again; each gets metrics.rescored.json and rescore.json beside
its metrics.json, which is kept as the job measured it. Exit 2, with nothing written, when a
job's corpus or queries changed since it ran. The work is done by `retrieval_bench.labels.rescore`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from retrieval_bench.jobdir.files import read_metrics
from retrieval_bench.labels.rescore import Rescored, rescore_path, write_rescored
from run.exits import guarded


def _headline(rescored: Rescored, before: dict[str, object]) -> str:
    """The final stage's nDCG at top_k, as the job measured it and as re-scored."""
    k = min(rescored.metrics["cutoffs"])
    name = f"ndcg@{k}"
    new = rescored.metrics["stages"]["final"]["overall"].get(name)
    old = before.get(name)

    def fmt(value: object) -> str:
        return f"{value:.4f}" if isinstance(value, float) else "undefined"

    return f"final {name} {fmt(old)} -> {fmt(new)}"


def main(argv: Sequence[str] | None = None) -> int:
    """The command, with the exit codes of run.exits for whatever escapes it."""
    return guarded(lambda: _main(argv))


def _main(argv: Sequence[str] | None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m run.rescore",
        description="Re-score finished jobs' stored rankings against the current labels.",
    )
    parser.add_argument("path", type=Path, help="a job folder, a sweep folder or a month folder")
    parser.add_argument(
        "--evalset", type=Path, help="a label snapshot to score against instead of the job's"
    )
    args = parser.parse_args(argv)
    results = rescore_path(args.path, args.evalset)
    # Every job's recorded metrics read before anything is written: a bad one leaves every
    # folder as it was.
    recorded = [read_metrics(r.job_dir)["stages"].get("final", {}) for r in results]
    for rescored, final in zip(results, recorded, strict=True):
        written = write_rescored(rescored)
        print(
            f"{rescored.job_dir}: {rescored.labels_line()}; "
            f"{_headline(rescored, final.get('overall', {}))}; "
            f"wrote {written[0].name}, {written[1].name}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
