"""Tracking's overhead: a 3-job sweep with tracking=none against the same sweep with
tracking=mlflow, side by side, alternating, in one run.

    .venv/bin/python benchmarks/bench_tracking.py           # travel, a real server
    .venv/bin/python benchmarks/bench_tracking.py --quick   # the mini fixture, sqlite
    .venv/bin/python benchmarks/bench_tracking.py --tune    # a tuning (experiment=tune_fusion)
    .venv/bin/python benchmarks/bench_tracking.py --server-start   # the server's own start-up
    .venv/bin/python benchmarks/bench_tracking.py --phases --repeat 21   # where the time goes
    .venv/bin/python benchmarks/bench_tracking.py --burn 1.9@0.5 --burn-kind python --repeat 21
    .venv/bin/python benchmarks/bench_tracking.py --uri http://tracker.example:5000 --repeat 21
    .venv/bin/python benchmarks/bench_tracking.py --null-tracker --phases --repeat 21
    .venv/bin/python benchmarks/bench_tracking.py --logger-cost --repeat 5   # its CPU a run

Each side is the app itself (`python -m run -m retriever=bm25,dense,hybrid ...`) in a process of
its own, with a warm embedding cache (one untimed sweep first); with `--tune` each side is a tuning
instead (`python -m run.tune experiment=tune_fusion`: 30 trials in each of 6 Optuna studies, every
trial a child run of the tuning's); the two sides alternate `--repeat` times so a drift of the
machine's speed hits both alike. The tracked side logs to a real `mlflow server` on 127.0.0.1
(sqlite backend, local artifact root; started here, on a free port), with `--store sqlite` to a
sqlite file, or with `--uri` to a tracker already running (a server on another host, as a team runs
one: its work then is not on the sweep's cores, as it is with the local server; its runs stay
there, in an experiment of their own). Reported: each side's wall time (median and every run), the
ratio tracked / untracked (the issue's target: at most 1.05), the CPU seconds of each sweep's
process tree, how long the tracked sweep waited for its logger after its own end (what of the
logging is on the sweep's path by design; the rest runs beside its jobs and costs wall time only
where no core is free), and what the tracker holds afterwards (one parent and three children per
tracked sweep, each child's metrics equal to its metrics.json), so the time bought is for the
logging actually done. With `--phases` (sweeps only), each sweep also records where its time goes
(`phase_marks.py`, a Hydra callback added to both sides) and the script prints each phase's median
per side: start-up, each job, the end (the comparison, and the tracked sweep's wait for its
logger), the interpreter's exit. With `--burn`, each round has a third side, a control: the
untracked sweep beside a plain process that does that many CPU seconds of other work
(`--burn-kind`) and no tracking, so what tracking costs can be read against what as much other work
beside the sweep costs on the same machine, in the same run. With `--null-tracker`, another
side logs the tracked sweep to `null_tracker.py`, which answers MLflow's requests with no work:
the logger's whole cost with the server's work off these cores (a control; only the real
server's runs are checked).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "mini"
sys.path.insert(0, str(ROOT / "tests"))
TARGET = 1.05

from phase_marks import PHASES_ENV, phases  # noqa: E402  (this folder, as the script runs)


def sweep(
    args: list[str],
    folder: Path,
    tune: bool = False,
    burner: str | None = None,
    marks: Path | None = None,
) -> tuple[float, float, float, dict[str, float]]:
    """The sweep's (or tuning's) wall seconds, the CPU seconds of its whole process tree (the
    sweep, its jobs and its logger; the local tracking server's own work is reported apart),
    the seconds it waited for its logger after its end (0 untracked), and its phases (`marks`:
    the file its phase marks go to, `--phases`; else {}). `burner`: the code of a plain
    CPU-bound process run beside the sweep (`--burn`, `burner_code`)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    command = (
        ["run.tune", *args, f"tune.dir={folder}"]
        if tune
        else ["run", "-m", *args, f"hydra.sweep.dir={folder}"]
    )
    if marks is not None:
        marks.unlink(missing_ok=True)
        env[PHASES_ENV] = str(marks)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(Path(__file__).parent), env.get("PYTHONPATH")) if p
        )
        command.append("+hydra.callbacks.bench_phases._target_=phase_marks.PhaseMarks")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    beside = None if burner is None else subprocess.Popen([sys.executable, "-c", burner])
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", *command],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    if beside is not None:
        beside.wait()
    if proc.returncode != 0:
        sys.exit(f"python -m {' '.join(command)} failed:\n{proc.stderr[-3000:]}")
    if "warning:" in proc.stderr:
        sys.exit(f"the tracked sweep was not fully logged:\n{proc.stderr[-3000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    waited = re.search(r"logged to \S+ \((\d+\.\d+) s after its end\)", proc.stdout)
    split = phases(marks.read_text(), seconds) if marks is not None else {}
    return seconds, cpu, float(waited[1]) if waited else 0.0, split


# `--burn-kind`: what the control process does for its CPU seconds. `spin` asks for its own
# CPU time in a loop (a system call and little else); `python` builds, encodes, parses and
# sorts JSON as the logger and a tracking server do (the interpreter's objects, allocation,
# memory traffic). On this project's 2-core VM the second costs a sweep beside it more than the
# first does for the same CPU seconds, up to about twice (BENCHMARKS.md, "Tracking").
BURNERS = {
    "spin": """import time
time.sleep(DELAY)
t = time.process_time()
while time.process_time() - t < SECONDS:
    pass
""",
    "python": """import json, time
time.sleep(DELAY)
t = time.process_time()
d = {f"k{i}": [i, str(i) * 5, {"x": i / 3}] for i in range(20000)}
while time.process_time() - t < SECONDS:
    e = json.loads(json.dumps(d))
    s = sorted(e.items(), key=lambda kv: kv[1][1])
""",
}


def burner_code(seconds: float, delay: float, kind: str) -> str:
    """The control process's code: `kind`'s work (`BURNERS`) for `seconds` of its CPU, after
    sleeping `delay` seconds."""
    return BURNERS[kind].replace("SECONDS", str(seconds)).replace("DELAY", str(delay))


def check_logged(uri: str, experiment: str, folders: list[Path]) -> str:
    """One parent and three children per tracked sweep, every child's metrics its
    metrics.json's."""
    from retrieval_bench.config.tracking import TrackingConfig
    from retrieval_bench.jobdir.read import find_job_dirs
    from retrieval_bench.tracking import names as tn
    from retrieval_bench.tracking.content import job_metrics
    from retrieval_bench.tracking.store import TrackingStore

    store = TrackingStore.open(TrackingConfig(kind="mlflow", uri=uri))
    exp = store.client.get_experiment_by_name(experiment)
    runs = store.runs(exp.experiment_id) if exp is not None else []
    parents = {r.data.tags.get(tn.FOLDER): r for r in runs if r.data.tags.get(tn.KIND) == "sweep"}
    children = [r for r in runs if r.data.tags.get(tn.KIND) == "job"]
    if sorted(parents) != sorted(str(f.resolve()) for f in folders):
        sys.exit(f"parent runs {sorted(parents)} are not the sweeps {folders}")
    if len(children) != 3 * len(folders):
        sys.exit(f"{len(children)} child runs for {len(folders)} sweeps of 3 jobs")
    by_folder = {r.data.tags[tn.FOLDER]: r for r in children}
    for folder in folders:
        for job in find_job_dirs(folder):
            run = by_folder[str(job.resolve())]
            metrics = json.loads((job / "metrics.json").read_text())
            if run.data.metrics != job_metrics(metrics):
                sys.exit(f"{job}: the run's metrics differ from metrics.json")
            if run.data.tags.get(tn.PARENT_RUN_ID) != parents[str(folder.resolve())].info.run_id:
                sys.exit(f"{job}: not a child of its sweep's run")
    values = sum(len(r.data.metrics) for r in children) // len(children)
    return f"{len(parents)} parents, {len(children)} children of ~{values} metrics each, exact"


def server_cpu(server: Any) -> float:
    """CPU seconds the local tracking server (its process and its workers) has used so far: it
    shares this machine's cores with the sweep, which a remote tracker would not (0 without one;
    Linux's /proc)."""
    if server is None or server.proc is None:
        return 0.0
    total, todo = 0.0, [server.proc.pid]
    while todo:
        pid = todo.pop()
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            for task in Path(f"/proc/{pid}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    return total


def check_tunings_logged(uri: str, experiment: str, folders: list[Path]) -> str:
    """One run per tracked tuning holding its scores, and every finished trial of its studies
    a child of it with its objective."""
    from retrieval_bench.config.tracking import TrackingConfig
    from retrieval_bench.jobdir.files import read_json
    from retrieval_bench.tracking import names as tn
    from retrieval_bench.tracking.store import TrackingStore
    from retrieval_bench.tracking.tune_log import trial_contents, tuning_content
    from retrieval_bench.tune.names import TUNE_JSON

    store = TrackingStore.open(TrackingConfig(kind="mlflow", uri=uri))
    exp = store.client.get_experiment_by_name(experiment)
    runs = store.runs(exp.experiment_id) if exp is not None else []
    parents = {r.data.tags.get(tn.FOLDER): r for r in runs if r.data.tags.get(tn.KIND) == "tune"}
    trials = {r.data.tags[tn.FOLDER]: r for r in runs if r.data.tags.get(tn.KIND) == "trial"}
    if sorted(parents) != sorted(str(f.resolve()) for f in folders):
        sys.exit(f"tuning runs {sorted(parents)} are not the tunings {folders}")
    expected = 0
    for folder in folders:
        parent = parents[str(folder.resolve())]
        if parent.data.metrics != tuning_content(folder, read_json(folder / TUNE_JSON)).metrics:
            sys.exit(f"{folder}: the tuning's run differs from its tune.json")
        for content in trial_contents(folder):
            expected += 1
            run = trials.get(content.key)
            if run is None or run.data.metrics != content.metrics:
                sys.exit(f"{content.key}: not logged as it is in the study")
            if run.data.tags.get(tn.PARENT_RUN_ID) != parent.info.run_id:
                sys.exit(f"{content.key}: not a child of its tuning's run")
    if len(trials) != expected:
        sys.exit(f"{len(trials)} trial runs for {expected} trials")
    return f"{len(parents)} tunings, {expected} trials as their children, exact"


def requests_logged(server: Any) -> collections.Counter[str]:
    """The requests the local server has answered so far, by endpoint (its access log; files
    counted as one endpoint), so a sweep's requests are the difference before and after it."""
    if server is None:
        return collections.Counter()
    text = (server.folder / "server.log").read_text(errors="replace")
    found = re.findall(r'"(?:GET|POST|PUT|PATCH) (/api/[^ ?]+)', text)
    return collections.Counter(re.sub(r"/artifacts/.*", "/artifacts", path) for path in found)


def server_start(seconds: float = 10.0) -> int:
    """What a `mlflow server` costs to start, with MLflow's job runner (as `mlflow server`
    starts by default) and without it (as the tests, this script and docs/how-to/tracking.md
    start it): the CPU of its process tree when `/health` first answers, and what it uses in
    the `seconds` after, idle."""
    from support.mlflow_server import MlflowServer

    with tempfile.TemporaryDirectory(prefix="bench-server-") as tmp:
        for job_runner in (True, False):
            server = MlflowServer(Path(tmp) / f"runner-{job_runner}", job_runner=job_runner)
            start = time.perf_counter()
            server.start()
            answered, at = server_cpu(server), time.perf_counter() - start
            time.sleep(seconds)
            after = server_cpu(server) - answered
            server.stop()
            print(
                f"RESULT server start: job runner {'on' if job_runner else 'off'}: answered in "
                f"{at:.1f} s having used {answered:.1f} CPU s; {after:.1f} CPU s in the "
                f"{seconds:.0f} s after, idle",
                flush=True,
            )
    return 0


def burn_spec(text: str) -> tuple[float, float]:
    """`--burn`'s value: CPU seconds, and the delay before them (default 0)."""
    seconds, _, delay = text.partition("@")
    try:
        spec = (float(seconds), float(delay or 0))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: SECONDS@DELAY, e.g. 2.6@2") from None
    if spec[0] <= 0 or spec[1] < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: SECONDS > 0 and DELAY >= 0")
    return spec


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="the mini fixture, a sqlite store")
    parser.add_argument("--repeat", type=int, default=3, help="sweeps per side (alternating)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--store", choices=["server", "sqlite"], default="")
    where.add_argument(
        "--uri",
        help="log to this MLflow tracker, already running (e.g. a server on another host); "
        "nothing is started here, its CPU and requests are not counted, and its runs stay "
        "there in an experiment named bench-<date>-<time>-<pid>",
    )
    parser.add_argument("--workdir", type=Path, help="default: a temporary folder")
    parser.add_argument("--tune", action="store_true", help="a tuning on each side, not a sweep")
    parser.add_argument(
        "--server-start",
        action="store_true",
        help="only what a local mlflow server costs to start, with and without its job runner",
    )
    parser.add_argument(
        "--phases",
        action="store_true",
        help="also where each sweep's time goes: start-up, each job, the end, the exit",
    )
    parser.add_argument(
        "--burn",
        metavar="SECONDS@DELAY",
        type=burn_spec,
        help="a control, no tracking: a third side, the untracked sweep beside a plain "
        "CPU-bound process of SECONDS CPU started DELAY s in (what that much other work on the "
        "sweep's cores costs by itself; e.g. 1.9@0.5)",
    )
    parser.add_argument(
        "--burn-kind",
        choices=sorted(BURNERS),
        help="the --burn process's work: spin (a loop on a system call) or python (JSON and "
        "sorting, like a logger's or a server's work); default spin",
    )
    parser.add_argument(
        "--null-tracker",
        action="store_true",
        help="a control, another side: the tracked sweep logging to null_tracker.py, which "
        "answers MLflow's requests with no work (the server's work off these cores; sweeps only)",
    )
    parser.add_argument(
        "--logger-cost",
        action="store_true",
        help="only the logger's own CPU for each run of one sweep, logged to null_tracker.py "
        "(--repeat times)",
    )
    args = parser.parse_args()
    if args.server_start:
        return server_start()
    if args.logger_cost:
        others = (args.tune, args.phases, args.burn, args.null_tracker, args.uri, args.store)
        if any(others):
            parser.error("--logger-cost: only with --quick and --repeat (it runs no sides)")
        return logger_cost(args.quick, args.repeat)
    if args.phases and args.tune:
        parser.error("--phases: sweeps only (a tuning is no multirun)")
    if args.null_tracker and args.tune:
        parser.error("--null-tracker: sweeps only")
    if args.burn_kind and args.burn is None:
        parser.error("--burn-kind: the kind of --burn's work, so with --burn only")
    args.burn_kind = args.burn_kind or "spin"
    burn = args.burn
    burner = None if burn is None else burner_code(burn[0], burn[1], args.burn_kind)
    store = args.store or ("sqlite" if args.quick else "server")
    experiment = "bench"
    if args.uri:
        from retrieval_bench.config.tracking import TrackingConfig
        from retrieval_bench.errors import ConfigError
        from retrieval_bench.tracking.store import check_reachable

        try:
            check_reachable(TrackingConfig(kind="mlflow", uri=args.uri))
        except ConfigError as exc:
            parser.error(f"--uri: {exc.message}")
        # A tracker that holds other runs: this run's sweeps, and only they, are checked.
        experiment = f"bench-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    with tempfile.TemporaryDirectory(prefix="bench-tracking-") as tmp:
        work = args.workdir or Path(tmp)
        what = ["experiment=tune_fusion"] if args.tune else ["retriever=bm25,dense,hybrid"]
        base = [*what, f"cache_dir={work / 'cache'}", *_quick(args.quick)]
        server = None
        if args.uri:
            uri = args.uri
        elif store == "server":
            from support.mlflow_server import MlflowServer

            server = MlflowServer(work / "server")
            server.start()
            uri = server.url
        else:
            uri = f"sqlite:///{work / 'mlflow.db'}"
        tracked = [
            *base, "tracking=mlflow", f"tracking.uri={uri}", f"tracking.experiment={experiment}"
        ]  # fmt: skip
        # Each round: the untracked sweep, the tracked one, and with --burn the untracked one
        # beside the control process.
        sides: dict[str, tuple[list[str], str | None]] = {
            "none": (base, None),
            "mlflow": (tracked, None),
        }
        if burner is not None:
            sides["burn"] = (base, burner)
        null = null_tracker(work / "null") if args.null_tracker else None
        if null is not None:
            sides["null"] = ([*tracked, f"tracking.uri={null.url}"], None)
        try:
            if null is not None:
                null.start()
            sweep(base, work / "warm-none", args.tune)  # the embedding cache, the interpreter's
            warm = f"tracking.experiment={experiment}-warm"
            sweep([*tracked, warm], work / "warm-mlflow", args.tune)
            if "null" in sides:
                sweep(sides["null"][0], work / "warm-null")
            times: dict[str, list[float]] = {side: [] for side in sides}
            cpu: dict[str, list[float]] = {side: [] for side in sides}
            split: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
            waits: list[float] = []
            serving: list[float] = []
            requests: list[collections.Counter[str]] = []
            marks = work / "phases.txt" if args.phases else None
            folders = []
            for i in range(args.repeat):
                for side, (given, beside) in sides.items():
                    served, answered = server_cpu(server), requests_logged(server)
                    wall, used, waited, parts = sweep(
                        given, work / f"{side}-{i}", args.tune, beside, marks
                    )
                    split[side].append(parts)
                    if side == "mlflow":
                        serving.append(server_cpu(server) - served)
                        requests.append(requests_logged(server) - answered)
                        waits.append(waited)
                    times[side].append(wall)
                    cpu[side].append(used)
                folders.append(work / f"mlflow-{i}")
                said = [f"{s} {times[s][-1]:.2f} s ({cpu[s][-1]:.1f} CPU s)" for s in cpu]
                print(f"round {i + 1}: {', '.join(said)}; waited {waits[-1]:.2f} s", flush=True)
            check = check_tunings_logged if args.tune else check_logged
            logged = check(uri, experiment, folders)
        finally:
            if server is not None:
                server.stop()
            if null is not None:
                null.stop()
    dataset = "mini" if args.quick else "travel"
    work_done = "tuning (30 trials x 6 studies)" if args.tune else "3-job sweep"
    print(f"logged: {logged}" + (f" (experiment {experiment} at {uri})" if args.uri else ""))
    if args.phases:
        labels = (
            ("mlflow", "tracking phases"),
            ("burn", "tracking control phases"),
            ("null", "tracking null tracker phases"),
        )
        for side, label in labels:
            if side in sides:
                print(f"RESULT {label}: median s, none / {side}: {_phases(split, side)}")
    print(
        f"RESULT tracking: {dataset} {work_done}, "
        + (f"the tracker at {args.uri}" if args.uri else f"{store} store")
        + f", median of {args.repeat}: "
        + _against_none(times, cpu, "mlflow")
        + f" (target <= {TARGET}); the tracked {work_done.split()[-1]} "
        f"waited {statistics.median(waits):.2f} s for its logger after its end"
        + (f"; the server's own CPU {statistics.median(serving):.1f} s" if server else "")
        + (
            f"; requests per tracked {work_done.split()[-1]} {_requests(requests)}"
            if server
            else ""
        )
    )
    if burn is not None:
        print(
            f"RESULT tracking control: the untracked {work_done.split()[-1]} beside "
            f"{burn[0]:g} CPU s of {args.burn_kind} work started {burn[1]:g} s in, no tracking, "
            f"median of {args.repeat}: " + _against_none(times, cpu, "burn")
        )
    if args.null_tracker:
        print(
            "RESULT tracking null tracker: the tracked sweep logging to a tracker that answers "
            "with no work (the server's work off these cores), median of "
            f"{args.repeat}: " + _against_none(times, cpu, "null")
        )
    return 0


def null_tracker(folder: Path) -> Any:
    """`null_tracker.py`, run as the tests' `mlflow server` is (`support.mlflow_server`): a free
    port, its own process group, `start()` waits for its /health, `stop()` ends the group."""
    from support.mlflow_server import MlflowServer

    script = Path(__file__).with_name("null_tracker.py")

    class NullTracker(MlflowServer):
        def command(self) -> list[str]:
            return [sys.executable, str(script), str(self.port)]

    return NullTracker(folder)


def logger_cost(quick: bool, repeat: int) -> int:
    """The logger's own CPU for each run of one finished sweep, the server's work left out: the
    sweep run once untracked, then logged to the null tracker run by run, as the live logger
    logs it (the parent opened, each job handed, the comparison at the end), with
    `time.process_time()` around each step, in this process. The first open pays MLflow's
    import; each repeat logs the same folder again as new runs (the null tracker stores
    nothing, so nothing is found again)."""
    from retrieval_bench.config.tracking import TrackingConfig
    from retrieval_bench.jobdir.read import find_job_dirs
    from retrieval_bench.tracking.store import TrackingStore
    from retrieval_bench.tracking.sync import Syncer

    with tempfile.TemporaryDirectory(prefix="bench-logger-") as tmp:
        work = Path(tmp)
        args = ["retriever=bm25,dense,hybrid", f"cache_dir={work / 'cache'}", *_quick(quick)]
        sweep(args, work / "sweep")
        jobs = find_job_dirs(work / "sweep")
        tracker = null_tracker(work / "null")
        tracker.start()
        steps: dict[str, list[float]] = collections.defaultdict(list)
        try:
            for _ in range(repeat):
                at = time.process_time()
                cfg = TrackingConfig(kind="mlflow", uri=tracker.url)
                syncer = Syncer(TrackingStore.open(cfg), "logger-cost")
                parent = syncer.open_sweep(work / "sweep", "bench", new_folder=True)
                steps["open"].append(time.process_time() - at)
                for job in jobs:
                    at = time.process_time()
                    syncer.job(job, parent.run_id, job.name, handed=True)
                    steps[job.name.partition("=")[2] or job.name].append(time.process_time() - at)
                at = time.process_time()
                logged = {k for k, r in syncer.synced.runs.items() if r.run_id != parent.run_id}
                syncer.sweep(work / "sweep", skip=logged, dataset="bench")
                steps["the sweep's end"].append(time.process_time() - at)
        finally:
            tracker.stop()
    first = steps["open"][0]
    said = [f"open (MLflow's import, the parent's run) {first:.2f} s the first time"]
    if repeat > 1:
        said.append(f"{statistics.median(steps['open'][1:]):.3f} s after")
    said += [f"{name} {statistics.median(v):.3f} s" for name, v in steps.items() if name != "open"]
    dataset = "mini" if quick else "travel"
    print(
        f"RESULT logger cost: CPU s in the logger, a {dataset} 3-job sweep logged to the null "
        f"tracker (no server work), median of {repeat}: " + ", ".join(said),
        flush=True,
    )
    return 0


def _quick(quick: bool) -> list[str]:
    """The mini fixture's dataset overrides (`--quick`), else none."""
    if not quick:
        return []
    return [
        "dataset.name=mini",
        f"dataset.corpus={FIXTURE / 'corpus' / 'mini'}",
        f"dataset.evalset={FIXTURE / 'evalsets' / 'mini.jsonl'}",
    ]


def _against_none(times: dict[str, list[float]], cpu: dict[str, list[float]], side: str) -> str:
    """A side's CPU and wall time against the untracked sweep's: the ratio of the medians, and
    the median (with quartiles) of each round's own ratio. Each round's sweeps ran one after
    the other, so that ratio is blind to a drift of the machine's speed over the rounds (which
    the ratio of the medians is not)."""
    none, mine = statistics.median(times["none"]), statistics.median(times[side])
    pairs = sorted(t / n for t, n in zip(times[side], times["none"], strict=True))
    quartiles = statistics.quantiles(pairs, n=4) if len(pairs) > 1 else [pairs[0]] * 3
    cpu_none, cpu_mine = statistics.median(cpu["none"]), statistics.median(cpu[side])
    return (
        f"CPU s of the process tree none {cpu_none:.1f}, {side} {cpu_mine:.1f} "
        f"(+{cpu_mine - cpu_none:.1f}); wall none {none:.2f} s, {side} {mine:.2f} s, "
        f"per round {side} / none: median {quartiles[1]:.3f} (quartiles {quartiles[0]:.3f} to "
        f"{quartiles[2]:.3f}), ratio {mine / none:.3f}"
    )


def _phases(split: dict[str, list[dict[str, float]]], other: str) -> str:
    """Each phase's median on each side, and the difference."""
    said = []
    for phase in split["none"][0]:
        none = statistics.median(p[phase] for p in split["none"])
        tracked = statistics.median(p[phase] for p in split[other])
        said.append(f"{phase} {none:.2f} / {tracked:.2f} ({tracked - none:+.2f})")
    return ", ".join(said)


def _requests(counts: list[collections.Counter[str]]) -> str:
    """The median number of requests, and of each endpoint's, over the tracked sweeps."""
    total = statistics.median(sum(c.values()) for c in counts)
    endpoints = sorted({e for c in counts for e in c})
    each = {e.rsplit("/", 1)[-1]: statistics.median(c[e] for c in counts) for e in endpoints}
    said = ", ".join(f"{name} {n:g}" for name, n in sorted(each.items(), key=lambda x: -x[1]))
    return f"{total:g} ({said})"


if __name__ == "__main__":
    sys.exit(main())
