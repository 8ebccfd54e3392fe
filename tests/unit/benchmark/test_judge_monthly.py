"""The monthly job's judge step, in-process: a month's jobs are pooled, the pool judged by the
stand-in model (tests/support/judge_server.py), the month re-scored against people's plus the
judge's labels and compared with the three estimates; the gate re-scores the baseline month against
the same labels and says which checks rest on judged labels; a rerun asks the model nothing
new. Month folders hold real mini-set jobs written as the app writes them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURE, run_mini
from support.judge_server import chat_model

from retrieval_bench.benchmark.history import month_jobs
from retrieval_bench.benchmark.judge_step import judge_month, month_judge
from retrieval_bench.benchmark.month import gate_month
from retrieval_bench.compare.build import compare_dirs
from retrieval_bench.config import RunConfig, register_configs
from retrieval_bench.config.benchmark import BenchmarkJudgeConfig
from retrieval_bench.data.evalset import load_evalset
from retrieval_bench.errors import ConfigError


def month(root: Path, name: str, evalset: Path, cache: Path, b: str) -> Path:
    folder = root / name
    run_mini(folder / "mini" / "bm25", "bm25", evalset, cache, f"arms.bm25.b={b}")
    (folder / "benchmark.json").write_text(json.dumps({"month": name, "status": "finished"}))
    return folder


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_a_month_judges_its_pool_and_the_gate_says_what_rests_on_it(tmp_path: Path) -> None:
    register_configs()
    evalset = tmp_path / "mini.jsonl"
    shutil.copy(FIXTURE / "evalsets" / "mini.jsonl", evalset)
    root, cache = tmp_path / "benchmarks", tmp_path / "cache"
    first = month(root, "2026-01", evalset, cache, "0.75")
    (first / "gate.json").write_text(json.dumps({"month": "2026-01", "status": "no baseline"}))
    second = month(root, "2026-02", evalset, cache, "0.1")
    cfg = RunConfig(cache_dir=str(cache))
    cfg.benchmark.root = str(root)
    with chat_model() as (url, received):
        cfg.benchmark.judge = BenchmarkJudgeConfig(kind="openai", url=url, model="stand-in")
        current, snapshots, lines = judge_month(cfg, month_jobs(second))
        asked = len(received)
        assert asked > 0 and "judge mini:" in lines[0]
        judge_month(cfg, month_jobs(second))  # a rerun of the month
        assert len(received) == asked
    folder = second / "mini"
    snapshot = snapshots[folder]
    assert snapshot.parent == folder / "judge" and (folder / "judge" / "judgments.jsonl").is_file()
    assert load_evalset(evalset) == load_evalset(tmp_path / "mini.jsonl")  # never written
    assert any(q.judge for q in load_evalset(snapshot))
    job = next(iter(current.values()))
    assert (job.path / "metrics.rescored.json").is_file()
    assert (
        job.manifest["labels"]["hash"]
        != json.loads((job.path / "manifest.json").read_text(encoding="utf-8"))["labels"]["hash"]
    )

    result = compare_dirs(
        [folder], cfg.compare, out_dir=folder, baselines=[], judged_labels=snapshot
    )
    assert "judge_estimates" in result.record["datasets"]["mini"]
    assert "Estimates with the judge's labels" in (folder / "comparison.md").read_text("utf-8")

    assert gate_month(cfg, root, "2026-02", current) is not None
    gate = json.loads((second / "gate.json").read_text(encoding="utf-8"))
    assert any("baseline re-scored against current labels" in line for line in gate["relabelled"])
    shares = [c["judged_share"] for c in gate["checks"] if c["n"] > 0]
    assert shares and all(s is not None and 0 < s <= 1 for s in shares)
    assert "| judge |" in (second / "gate.md").read_text(encoding="utf-8")


def test_bad_judge_settings_name_their_key() -> None:
    with pytest.raises(ConfigError, match=r"benchmark\.judge\.url"):
        month_judge(BenchmarkJudgeConfig(kind="openai", model="m"))
    with pytest.raises(ConfigError, match=r"benchmark\.judge\.thresholds"):
        month_judge(BenchmarkJudgeConfig(kind="cross_encoder", model="/no/model"))
    with pytest.raises(ConfigError, match=r"benchmark\.judge\.kind"):
        BenchmarkJudgeConfig(kind="gpt").validate()
