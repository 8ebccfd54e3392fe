"""`python -m run.tune [--config-dir DIR] OVERRIDES...`: tune a job's settings with Optuna and
estimate, on held-out queries, how much of the tuned gain holds (retrieval_bench.tune).

OVERRIDES are the app's (`python -m run`'s): `tune.*` settings, the job's own overrides, and
search dimensions, written as Hydra sweeps of job keys (`'combiners.rrf.k=range(10,101)'`,
`'retriever.weights=interval(0,1)'`) or listed under `tune.space` (an experiment preset does).
Writes tune.json, tune.md and tuned.yaml into `tune.dir` (default a new folder under
outputs/tune/), whose SQLite study a rerun with the same `tune.dir` resumes. Exit codes as
`python -m run` (run.exits): 0 ok, 2 bad input or config (naming the key), 3 internal error,
130 interrupted (rerun to resume).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from retrieval_bench.errors import interrupt_leaves
from retrieval_bench.tune.report import tune_text
from retrieval_bench.tune.run import Tuner, TuneRequest
from run.exits import guarded


def main(argv: Sequence[str] | None = None) -> int:
    """The command, with the exit codes of run.exits for whatever escapes it."""
    return guarded(lambda: _main(argv))


def _main(argv: Sequence[str] | None) -> int:
    parser = argparse.ArgumentParser(prog="python -m run.tune", description=__doc__)
    parser.add_argument(
        "--config-dir", type=Path, help="primary config folder instead of the shipped conf/"
    )
    parser.add_argument("overrides", nargs="*", help="tune.*, the job's overrides, and sweeps")
    args = parser.parse_args(argv)
    tuner = Tuner(TuneRequest(list(args.overrides), args.config_dir))
    folder = tuner.folder()
    print(f"tuning into {folder} (rerun with tune.dir={folder} to resume)", flush=True)
    tuner.cfg.tune.dir = str(folder)
    if tuner.cfg.tracking.enabled:  # tracking=mlflow: a tracker that does not answer is exit 2
        from retrieval_bench.tracking.store import check_reachable

        check_reachable(tuner.cfg.tracking)
    from run.tracking import log_finished, own_logger

    resume = f"the tuning in {folder} stopped; rerun with tune.dir={folder} to resume"
    with own_logger(tuner.cfg.tracking) as logger:  # loads while the tuning runs
        with interrupt_leaves(resume):
            tuning = tuner.run()
        print(tune_text(tuning.summary))
        print(f"\noutputs: {', '.join(str(p) for p in tuning.files)}")
        print(
            f"run the tuned configuration: python -m run --config-dir {folder} --config-name tuned"
        )
        if logger is not None:  # the folder is complete: the study and its trials logged
            start = time.perf_counter()
            warning = log_finished(folder, tuner.cfg.tracking, logger)
            waited = time.perf_counter() - start
            uri = tuner.cfg.tracking.uri
            print(
                warning or f"tracking: tuning logged to {uri} ({waited:.2f} s after its end)",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
