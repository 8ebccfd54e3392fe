"""Tuning against the single jobs it stands for: a K-fold tuning of fusion weights and rrf_k
over a hybrid job, and the retrieval of one single-configuration job per trial, side by side.

    .venv/bin/python benchmarks/bench_tune.py          # 5,000 passages, 500 queries, 50 x 5 folds
    .venv/bin/python benchmarks/bench_tune.py --quick  # 400 passages, 60 queries, 6 x 2 folds

The dataset is bench_e2e.py's (Chinese passages from chinese_corpus.py, each query made of one
passage's words and labelled with it, `keywords` and `phrase` queries alternating), with
precomputed vectors for the dense arm (dense_vectors.py), written outside the repository
(`--workdir`). One job first fills the token cache (jieba runs once, as it would before any
sweep), then:

* the tuning: `python -m run.tune`'s whole work in this process (compose, load, build the arms,
  the studies on all queries and on each fold, the held-out scores, the baseline test, tune.json
  and tuned.yaml), timed end to end;
* the single jobs: one `run_job` per trial of the tuning's all-queries study, with that trial's
  rrf_k and weights, and the sum of their `retrieve` phase (the job's own timer: parse, filter,
  both arms ranking every query, fusion, the cut), i.e. their retrieval alone.

The printed ratio is the tuning's whole time over the single jobs' retrieval, in wall time and
in this process's CPU time (what other work on a shared machine does not inflate; FAISS's
threads count in both sides' CPU time alike); the issue's target is at most 1.2x. The trials'
pools are computed once per arm setting and reused (the RESULT line counts the pools searched
and the queries replayed from kept pools), so the ratio falls as trials grow.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

TARGET = 1.2


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--passages", type=int, default=5000)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/rb-bench-tune"))
    parser.add_argument("--synthetic", action="store_true", help="skip cmrc2018 (and jieba)")
    parser.add_argument("--quick", action="store_true", help="a smoke run on a tiny set")
    args = parser.parse_args()
    if args.quick:
        args.passages, args.queries, args.trials, args.folds = 400, 60, 6, 2
    from bench_e2e import DatasetFiles, write_dataset

    name = f"tune{args.passages}q{args.queries}{'s' if args.synthetic else ''}"
    files = DatasetFiles(args.workdir, name)
    made = write_dataset(files, args.passages, args.queries, args.dim, args.synthetic)
    cache = args.workdir / "cache"
    overrides = [
        f"dataset.name={name}",
        f"dataset.corpus={files.corpus}",
        f"dataset.evalset={files.evalset}",
        "retriever=hybrid",
        "encoder=precomputed",
        f"encoder.path={files.vectors / 'passages.npy'}",
        f"encoder.ids_path={files.vectors / 'passage_ids.txt'}",
        f"encoder.query_path={files.vectors / 'queries.npy'}",
        f"encoder.query_ids_path={files.vectors / 'query_ids.txt'}",
        f"cache_dir={cache}",
        "retriever.pool_size=20",
    ]
    print(
        f"dataset: {args.passages:,} passages, {args.queries} queries ({made['source']}); "
        f"{args.trials} trials x {args.folds} folds; load {os.getloadavg()[0]:.1f} "
        f"on {os.cpu_count()} cores",
        flush=True,
    )
    from retrieval_bench.api import compose
    from retrieval_bench.job.runner import run_job

    warm = run_job(compose(overrides))
    print(f"warm-up job (fills the token cache): {sum(warm.timings.values()):.1f} s", flush=True)
    (tuning_s, tuning_cpu), tuned = run_tuning(overrides, args)
    trials = tried_overrides(tuned)
    print(
        f"tuning: {tuning_s:.2f} s ({tuning_cpu:.2f} s CPU); now {len(trials)} single jobs, "
        "one per trial",
        flush=True,
    )
    retrieval = RetrievalClock()
    for trial in trials:
        cfg = compose([*overrides, *trial])
        with retrieval.counting():
            result = run_job(cfg)
        retrieval.check(result.timings["retrieve"])
    ratio, cpu_ratio = tuning_s / retrieval.wall, tuning_cpu / retrieval.cpu
    work = tuned.summary["work"]
    print(
        f"RESULT tune: {args.trials} trials x {args.folds} folds (+ all queries) on "
        f"{args.passages:,} passages, {args.queries} queries: tuning {tuning_s:.2f} s vs "
        f"{len(trials)} single jobs' retrieval {retrieval.wall:.2f} s = {ratio:.2f}x (CPU time "
        f"{tuning_cpu:.2f} s vs {retrieval.cpu:.2f} s = {cpu_ratio:.2f}x; target <= "
        f"{TARGET}x: {'met' if ratio <= TARGET else 'NOT met'}); arm settings built "
        f"{work['arm_settings_built']}, pools searched {work['pools_searched']:,}, queries "
        f"replayed from kept pools {work['queries_replayed']:,}; load {os.getloadavg()[0]:.1f}"
    )
    print(
        f"RESULT tune estimate: tuned {tuned.summary['tuned_score']:.4f}, held-out "
        f"{tuned.summary['held_out_score']:.4f}, gap {tuned.summary['gap']:+.4f} "
        f"({tuned.summary['metric']})"
    )
    return 0


class RetrievalClock:
    """Wall and CPU time of the jobs' retrieval: `Pipeline.run`, exactly what a job's timer
    calls its `retrieve` phase, timed around each call (CPU time is this process's, which other
    work on a shared machine does not inflate)."""

    def __init__(self) -> None:
        self.wall = 0.0
        self.cpu = 0.0
        self._job_wall = 0.0

    @contextlib.contextmanager
    def counting(self) -> Iterator[None]:
        from retrieval_bench.job.pipeline import Pipeline

        original = Pipeline.run
        clock = self

        def timed(pipeline: Pipeline, queries: Any) -> Any:
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                return original(pipeline, queries)
            finally:
                clock._job_wall = time.perf_counter() - wall
                clock.wall += clock._job_wall
                clock.cpu += time.process_time() - cpu

        Pipeline.run = timed  # type: ignore[method-assign]
        try:
            yield
        finally:
            Pipeline.run = original  # type: ignore[method-assign]

    def check(self, retrieve_s: float) -> None:
        """The job's own `retrieve` phase and this clock's last reading are the same span."""
        assert abs(retrieve_s - self._job_wall) < 0.05 + 0.05 * retrieve_s, (retrieve_s, self)


def run_tuning(overrides: list[str], args: argparse.Namespace) -> tuple[tuple[float, float], Any]:
    """The whole tuning in this process, timed: wall and CPU seconds (a fresh study folder)."""
    import shutil

    from retrieval_bench.tune.run import Tuner, TuneRequest

    folder = args.workdir / "study"
    shutil.rmtree(folder, ignore_errors=True)
    start, cpu = time.perf_counter(), time.process_time()
    tuner = Tuner(
        TuneRequest(
            [
                *overrides,
                "combiners.rrf.k=range(1,101)",
                "retriever.weights=interval(0,1)",
                f"tune.trials={args.trials}",
                f"tune.folds={args.folds}",
                f"tune.dir={folder}",
            ]
        )
    )
    tuned = tuner.run()
    return (time.perf_counter() - start, time.process_time() - cpu), tuned


def tried_overrides(tuned: Any) -> list[list[str]]:
    """The overrides of every trial the all-queries study ran (from its SQLite storage)."""
    import optuna

    from retrieval_bench.tune.study import ALL_QUERIES

    study = optuna.load_study(study_name=ALL_QUERIES, storage=tuned.summary["storage"])
    return [
        list(t.user_attrs["overrides"])
        for t in study.get_trials(deepcopy=False)
        if "overrides" in t.user_attrs
    ]


if __name__ == "__main__":
    sys.exit(main())
