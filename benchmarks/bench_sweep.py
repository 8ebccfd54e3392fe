"""Sweep: a four-job Hydra multirun against the same four jobs run one by one, side by side.

    .venv/bin/python benchmarks/bench_sweep.py           # travel, hybrid, rrf_k=10,30,60,100
    .venv/bin/python benchmarks/bench_sweep.py --quick   # the tests' 12-passage fixture

Each side starts from an empty cache. Single runs: four `python -m run` processes in a row
(the first encodes the corpus; the later ones find it in the cache but each pays a process
start, imports, the jieba dictionary and the encoder's setup again). Sweep: one
`python -m run -m ...` process, first with `compare.enabled=false` so it writes exactly what the
four single runs write, then again with the end-of-sweep comparison on (the default). Reported:
wall time, passages and queries encoded per job (read from each job's manifest.json), how many
times the encoder model was loaded (its log line in each job's log), and the seconds each job
spent in its own phases, so "encode once, load once" is shown, not assumed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "mini"
MODEL_LOADED = "loading universal-sentence-encoder"


def run_app(args: list[str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    env = {**os.environ, "HYDRA_FULL_ERROR": "1", "PYTHONUNBUFFERED": "1"}
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "run", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"python -m run {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return seconds, proc


def encoded(job_dir: Path) -> tuple[int, int, int]:
    """(passages encoded, passages read from cache, queries encoded) from a job's manifest."""
    manifest = json.loads((job_dir / "manifest.json").read_text())
    emb = manifest.get("embeddings") or {}
    passages = emb.get("passages", {})
    queries = emb.get("queries", {})
    return passages.get("encoded", 0), passages.get("cached", 0), queries.get("encoded", 0)


def phase_seconds(job_dir: Path) -> float:
    """Seconds a job spent in its own phases (manifest timings_s)."""
    manifest = json.loads((job_dir / "manifest.json").read_text())
    return float(sum((manifest.get("timings_s") or {}).values()))


def model_loads(folder: Path) -> int:
    """Encoder loads logged by the jobs under `folder` (each job keeps its own .log)."""
    return sum(p.read_text(errors="replace").count(MODEL_LOADED) for p in folder.rglob("*.log"))


def run_sweep(
    common: list[str], args: argparse.Namespace, compare: bool, sweep_dir: Path
) -> tuple[float, list[Path]]:
    """One cold multirun of the four values; its wall time and job folders."""
    seconds, _ = run_app(
        [
            "-m",
            *common,
            f"{args.param}={args.values}",
            f"compare.enabled={str(compare).lower()}",
            f"cache_dir={sweep_dir / 'cache'}",
            f"hydra.sweep.dir={sweep_dir / 'jobs'}",
        ]
    )
    return seconds, sorted(p.parent for p in (sweep_dir / "jobs").rglob("manifest.json"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the 12-passage test fixture")
    parser.add_argument("--param", default="combiners.rrf.k", help="the swept key")
    parser.add_argument("--values", default="10,30,60,100", help="its four values")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folders")
    parser.add_argument(
        "--repeat", type=int, default=3, help="cold one-job / cold sweep pairs (median taken)"
    )
    parser.add_argument(
        "--no-compare-run", action="store_true", help="skip the sweep with its comparison"
    )
    args, extra = parser.parse_known_args(argv)
    values = args.values.split(",")
    if args.quick:
        extra = [
            "dataset.name=mini",
            f"dataset.corpus={FIXTURE / 'corpus' / 'mini'}",
            f"dataset.evalset={FIXTURE / 'evalsets' / 'mini.jsonl'}",
            *extra,
        ]
    work = Path(tempfile.mkdtemp(prefix="bench_sweep_"))
    common = ["retriever=hybrid", "hydra.job_logging.root.level=INFO", *extra]

    singles_dir = work / "singles"
    single_times: list[float] = []
    single_counts = []
    for i, value in enumerate(values):
        job_dir = singles_dir / f"job{i}"
        seconds, _ = run_app(
            [
                *common,
                f"{args.param}={value}",
                f"cache_dir={singles_dir / 'cache'}",
                f"hydra.run.dir={job_dir}",
            ]
        )
        single_times.append(seconds)
        single_counts.append(encoded(job_dir))
    single_loads = model_loads(singles_dir)

    sweeps = {}
    variants = [("one sweep, same outputs", False), ("one sweep + comparison", True)]
    for label, compare in variants[:1] if args.no_compare_run else variants:
        sweep_dir = work / ("sweep_compare" if compare else "sweep")
        seconds, job_dirs = run_sweep(common, args, compare, sweep_dir)
        sweeps[label] = (seconds, [encoded(d) for d in job_dirs], model_loads(sweep_dir))
        if not compare:
            phases = [phase_seconds(d) for d in job_dirs]

    # The headline ratio: cold one job against a cold sweep, interleaved pairs, medians (a
    # shared machine's noise hits single measurements by a second or more).
    cold_jobs, cold_sweeps = [single_times[0]], [sweeps["one sweep, same outputs"][0]]
    for r in range(1, max(1, args.repeat)):
        pair = work / f"repeat{r}"
        cold_jobs.append(
            run_app(
                [
                    *common,
                    f"{args.param}={values[0]}",
                    f"cache_dir={pair / 'job_cache'}",
                    f"hydra.run.dir={pair / 'job'}",
                ]
            )[0]
        )
        cold_sweeps.append(run_sweep(common, args, False, pair / "sweep")[0])

    n_jobs = len(values)
    name = "mini fixture" if args.quick else "travel"
    one_job = statistics.median(cold_jobs)
    print(
        f"{n_jobs}-job sweep over {args.param}={args.values} on {name} (retriever=hybrid), "
        "each side from an empty cache"
    )
    header = f"{'':<28}{'wall s':>9}{'vs one job':>12}{'passages encoded per job':>28}"
    header += f"{'model loads':>13}"
    print(header)
    print("-" * len(header))
    for i, (seconds, counts) in enumerate(zip(single_times, single_counts, strict=True)):
        print(
            f"{f'single run {i + 1}':<28}{seconds:>9.1f}{seconds / one_job:>11.2f}x{counts[0]:>28}"
        )
    total = sum(single_times)
    per_job = ", ".join(str(c[0]) for c in single_counts)
    print(
        f"{f'{n_jobs} single runs':<28}{total:>9.1f}{total / one_job:>11.2f}x{per_job:>28}"
        f"{single_loads:>13}"
    )
    for label, (seconds, counts, loads) in sweeps.items():
        per_job = ", ".join(str(c[0]) for c in counts)
        print(f"{label:<28}{seconds:>9.1f}{seconds / one_job:>11.2f}x{per_job:>28}{loads:>13}")
    _, counts, loads = sweeps["one sweep, same outputs"]
    sweep_s = statistics.median(cold_sweeps)
    print(
        f"cold one job (s): {', '.join(f'{t:.1f}' for t in cold_jobs)}; cold sweep (s): "
        f"{', '.join(f'{t:.1f}' for t in cold_sweeps)}; RESULT uses the medians"
    )
    queries = ", ".join(str(c[2]) for c in counts)
    print(f"queries encoded per sweep job: {queries}")
    inside = ", ".join(f"{p:.2f}" for p in phases)
    print(
        f"seconds inside each sweep job's own phases (load, index, retrieve, score): {inside}; "
        "the rest is process start, Hydra composition, output files and plots"
    )
    per_job = ", ".join(str(c[0]) for c in counts)
    print()
    print(
        f"RESULT sweep: {n_jobs}-job sweep {sweep_s:.1f}s = {sweep_s / one_job:.2f}x one job "
        f"({one_job:.1f}s, cold cache; medians of {len(cold_jobs)}) and "
        f"{total / sweep_s:.1f}x faster than {n_jobs} single runs "
        f"({total:.1f}s); passages encoded per sweep job [{per_job}], encoder loaded "
        f"{loads}x"
        + (
            f"; with the end-of-sweep comparison {sweeps['one sweep + comparison'][0]:.1f}s"
            if "one sweep + comparison" in sweeps
            else ""
        )
    )
    if not args.keep:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"kept {work}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
