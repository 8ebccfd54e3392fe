"""The monthly benchmark job: dated folders, the regression gate, the trend, resuming."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import run_app
from synth_dataset import write_synthetic

from retrieval_bench.benchmark.driver import job_overrides
from retrieval_bench.benchmark.history import BenchmarkError, month_lock, resolve_baseline
from retrieval_bench.errors import ConfigError

# A deliberately weakened retriever: the pool is cut to one passage, so every `pair` query
# loses one of its two relevant passages and every `deep` query loses its only one.
WEAKENED = "retriever.pool_size=1"


def monthly(root: Path, data: list[str], month: str, *extra: str):
    return run_app(
        [
            "experiment=monthly",
            f"benchmark.month={month}",
            f"benchmark.root={root}",
            "benchmark.retrievers=[bm25]",
            *data,
            *extra,
        ]
    )


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    tmp = tmp_path_factory.mktemp("monthly-data")
    return [*write_synthetic(tmp), f"cache_dir={tmp / 'cache'}"]


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory, data: list[str]):
    root = tmp_path_factory.mktemp("benchmarks")
    first = monthly(root, data, "2026-09")
    second = monthly(root, data, "2026-10", WEAKENED)
    return root, first, second


@pytest.mark.slow
def test_first_month_has_nothing_to_gate_against(history) -> None:
    root, first, _ = history
    assert first.returncode == 0, first.stderr
    assert "nothing to gate against" in first.stdout
    month = root / "2026-09"
    job = month / "synth" / "bm25"
    for name in ("metrics.json", "manifest.json", "report.md", "rankings.jsonl"):
        assert (job / name).is_file(), name
    assert (month / "synth" / "comparison.md").is_file()
    state = json.loads((month / "benchmark.json").read_text())
    assert state["status"] == "finished" and state["month"] == "2026-09"
    assert state["plan"]["retrievers"] == ["bm25"]


@pytest.mark.slow
def test_injected_regression_fails_the_gate_naming_metric_type_and_drop(history) -> None:
    root, _, second = history
    assert second.returncode == 1, second.stdout + second.stderr
    out = second.stdout + second.stderr
    assert "gate 2026-10: FAILED" in out
    line = next(x for x in second.stderr.splitlines() if "type=deep" in x and "recall@6" in x)
    assert line.startswith("REGRESSION: synth retriever=bm25 type=deep recall@6: 1.000 -> 0.000")
    assert "drop 1.000 > tolerance 0.02" in line and "Holm p=" in line and "n=10" in line
    assert "type=pair recall@6: 1.000 -> 0.500 (drop 0.500" in second.stderr
    gate = json.loads((root / "2026-10" / "gate.json").read_text())
    assert gate["passed"] is False and gate["baseline"] == str(root / "2026-09")
    failed = {(c["query_type"], c["metric"]) for c in gate["failures"]}
    assert ("deep", "recall@K") in failed and ("pair", "ndcg@K") in failed
    assert all(c["p_holm"] < 0.05 for c in gate["failures"])
    assert "FAILED" in (root / "2026-10" / "gate.md").read_text()


@pytest.mark.slow
def test_trend_report_covers_every_finished_month(history) -> None:
    root, _, _ = history
    png = root / "trend-synth.png"
    assert png.is_file() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    trend = json.loads((root / "trend.json").read_text())
    months = {p["month"] for p in trend["points"]}
    assert months == {"2026-09", "2026-10"}
    deep = {
        p["month"]: p["value"]
        for p in trend["points"]
        if p["type"] == "deep" and p["metric"] == "recall@K"
    }
    assert deep == {"2026-09": 1.0, "2026-10": 0.0}
    md = (root / "trend.md").read_text()
    assert "| type | retriever | 2026-09 | 2026-10 |" in md


@pytest.mark.slow
def test_a_month_never_mixes_two_plans(history, data: list[str]) -> None:
    root, _, _ = history
    proc = monthly(root, data, "2026-10")  # started with the weakened retriever
    assert proc.returncode == 2
    assert "was started with another plan" in proc.stderr
    assert WEAKENED in proc.stderr


@pytest.mark.slow
def test_pinned_baseline_and_previous(history, data: list[str], tmp_path: Path) -> None:
    root = tmp_path / "copy"
    shutil.copytree(history[0], root)
    # Against the previous month (also weakened) nothing drops...
    same = monthly(root, data, "2026-11", WEAKENED)
    assert same.returncode == 0, same.stderr
    assert "gate 2026-11: PASSED" in same.stdout
    # ...against the pinned good month it does.
    pinned = monthly(root, data, "2026-12", WEAKENED, "benchmark.baseline=2026-09")
    assert pinned.returncode == 1
    assert f"gate 2026-12 against {root / '2026-09'}" in pinned.stdout


@pytest.mark.slow
def test_interrupted_month_resumes_without_redoing_finished_jobs(
    data: list[str], tmp_path: Path
) -> None:
    root = tmp_path / "bench"
    args = ["benchmark.retrievers=[bm25,dense]"]
    first = monthly(root, data, "2026-09", *args)
    assert first.returncode == 0, first.stderr
    month = root / "2026-09"
    bm25 = month / "synth" / "bm25" / "metrics.json"
    before = (bm25.stat().st_ino, bm25.stat().st_mtime_ns)
    # Simulate a run killed while the dense job was writing: its last file is missing and
    # the month is not finished.
    (month / "synth" / "dense" / "report.md").unlink()
    state = json.loads((month / "benchmark.json").read_text())
    state["status"] = "running"
    (month / "benchmark.json").write_text(json.dumps(state))
    resumed = monthly(root, data, "2026-09", *args)
    assert resumed.returncode == 0, resumed.stderr
    assert "running ['travel'] x ['dense']" in resumed.stdout
    assert (bm25.stat().st_ino, bm25.stat().st_mtime_ns) == before
    assert (month / "synth" / "dense" / "report.md").is_file()
    state = json.loads((month / "benchmark.json").read_text())
    assert state["status"] == "finished" and len(state["runs"]) == 2
    # Nothing is left to run a third time.
    again = monthly(root, data, "2026-09", *args)
    assert again.returncode == 0 and "nothing to run" in again.stdout


def test_job_overrides_keep_what_applies_to_every_job() -> None:
    kept = job_overrides(
        [
            "experiment=monthly",
            "benchmark.month=2026-10",
            "dataset=travel",
            "retriever=bm25",
            "retriever.pool_size=1",
            "top_k=8",
            "hydra.verbose=true",
        ]
    )
    assert kept == ["retriever.pool_size=1", "top_k=8"]
    with pytest.raises(ConfigError, match="sweep"):
        job_overrides(["top_k=6,8"])


def test_month_lock_keeps_a_second_run_out(tmp_path: Path) -> None:
    with (
        month_lock(tmp_path / "2026-10"),
        pytest.raises(BenchmarkError, match="another"),
        month_lock(tmp_path / "2026-10"),
    ):
        pass
    with month_lock(tmp_path / "2026-10"):  # released again
        pass


def test_baseline_resolution(tmp_path: Path) -> None:
    assert resolve_baseline(tmp_path, "2026-10", "previous") is None
    with pytest.raises(BenchmarkError, match="not a finished benchmark month"):
        resolve_baseline(tmp_path, "2026-10", "2026-09")
    with pytest.raises(BenchmarkError, match="the month being run"):
        resolve_baseline(tmp_path, "2026-10", "2026-10")
