"""The monthly benchmark job: dated folders, job folders inside the month, the regression gate
and its baseline, the trend, resuming.

In-process tests build month folders by hand (fast); the app-level ones (`slow`) run
`python -m run experiment=monthly`, which starts each month's jobs as a Hydra multirun.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ROOT, run_app
from hydra import initialize_config_dir
from support.service_server import Reply, labelled_answers, serve
from support.synth_dataset import write_synthetic

from retrieval_bench.benchmark.history import (
    Baseline,
    BenchmarkError,
    JobKey,
    gate_status,
    month_jobs,
    month_lock,
    resolve_baseline,
)
from retrieval_bench.benchmark.month import (
    check_allowed_changes,
    compose_jobs,
    gate_month,
    job_folders,
    job_overrides,
    jobs_to_run,
    refuse_live_sweeps,
)
from retrieval_bench.benchmark.sweep import group_members, sweep_record
from retrieval_bench.config import RunConfig, register_configs
from retrieval_bench.config.benchmark import BenchmarkConfig, GateConfig
from retrieval_bench.errors import ConfigError
from retrieval_bench.io.strict_json import jsonl_text
from retrieval_bench.jobdir.read import FinishedJob
from run.monthly import print_gate

# A deliberately weakened month: the final list is cut to one passage, so every `pair` query
# loses one of its two relevant passages and every `deep` query its only one. top_k is part of
# the plan, so the gate must be told the change is deliberate (or it fails on that alone).
WEAKENED = ("top_k=1", "benchmark.gate.allow_plan_changes=[top_k]")


# --- In-process: month folders written by hand ----------------------------------------------


def write_job(
    folder: Path,
    values: dict[str, tuple[str, float]],
    dataset: str = "synth",
    retriever: str = "bm25",
    top_k: int = 6,
) -> None:
    """A finished job folder as a job writes it: query id -> (type, recall@top_k)."""
    metric = f"recall@{top_k}"
    per_query = {q: {"query_type": t, metric: v} for q, (t, v) in values.items()}
    (folder / ".hydra").mkdir(parents=True)
    (folder / "metrics.json").write_text(
        json.dumps({"stages": {"final": {"per_query": per_query}}})
    )
    manifest = {"config": {"top_k": top_k}, "dataset": {"name": dataset, "files_sha256": {}}}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    (folder / "report.md").write_text("report\n")
    choices = {"dataset": "travel", "retriever": retriever}
    hydra = {"hydra": {"runtime": {"choices": choices}, "job": {"num": 0}}}
    (folder / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump(hydra))


def write_month(
    root: Path,
    month: str,
    gate: str | None,
    value: float = 1.0,
    dataset: str = "synth",
) -> Path:
    """A finished month with one job (20 queries of type `pair` at `value`) and, unless None,
    the gate status it recorded."""
    month_dir = root / month
    values = {f"q{i:02d}": ("pair", value) for i in range(20)}
    write_job(month_dir / dataset / "bm25", values, dataset)
    (month_dir / "benchmark.json").write_text(json.dumps({"month": month, "status": "finished"}))
    if gate is not None:
        (month_dir / "gate.json").write_text(json.dumps({"month": month, "status": gate}))
    return month_dir


def test_baseline_is_the_latest_earlier_month_that_passed(tmp_path: Path) -> None:
    write_month(tmp_path, "2026-07", "no baseline")
    write_month(tmp_path, "2026-08", "passed")
    write_month(tmp_path, "2026-09", "failed")
    write_month(tmp_path, "2026-10", None)  # finished, but its gate never ran
    write_month(tmp_path, "2026-12", "passed")  # later than the month being run
    assert resolve_baseline(tmp_path, "2026-11", "previous") == Baseline(
        tmp_path / "2026-08",
        "2026-08: the latest earlier finished month whose gate passed; "
        "skipped 2026-10 (gate never ran), 2026-09 (gate failed)",
    )
    assert resolve_baseline(tmp_path, "2026-08", "previous") == Baseline(
        tmp_path / "2026-07",
        "2026-07: the latest earlier finished month whose gate passed (the first benchmark month)",
    )
    # A pinned month is used whatever its own gate said: how a deliberate change is accepted.
    assert resolve_baseline(tmp_path, "2026-11", "2026-09") == Baseline(
        tmp_path / "2026-09", "pinned by benchmark.baseline=2026-09 (its own gate: failed)"
    )


def test_earlier_months_none_of_which_passed_give_no_baseline_and_no_pass(tmp_path: Path) -> None:
    write_month(tmp_path, "2026-09", "failed")
    write_month(tmp_path, "2026-10", "not gated")
    assert resolve_baseline(tmp_path, "2026-11", "previous") == Baseline(
        None,
        "no earlier finished month passed its gate (2026-10 (gate not gated), "
        "2026-09 (gate failed)); review one and pin it with benchmark.baseline=YYYY-MM",
    )


def test_first_benchmark_and_bad_pins(tmp_path: Path) -> None:
    assert resolve_baseline(tmp_path, "2026-10", "previous") == Baseline(
        None, "no earlier finished month: the first benchmark", first=True
    )
    with pytest.raises(BenchmarkError, match="not a finished benchmark month"):
        resolve_baseline(tmp_path, "2026-10", "2026-09")
    with pytest.raises(BenchmarkError, match="the month being run"):
        resolve_baseline(tmp_path, "2026-10", "2026-10")


def test_gate_json_written_before_statuses_counts_only_a_real_pass(tmp_path: Path) -> None:
    legacy = {
        "first": {"baseline": None, "passed": True, "checks": []},
        "zero-checks": {"baseline": "x", "passed": True, "checks": []},
        "checked": {"baseline": "x", "passed": True, "checks": [{"n": 10}]},
        "failed": {"baseline": "x", "passed": False, "checks": [{"n": 10}]},
    }
    statuses = {}
    for name, record in legacy.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "gate.json").write_text(json.dumps(record))
        statuses[name] = gate_status(tmp_path / name)
    assert statuses == {
        "first": "no baseline",
        "zero-checks": "failed",
        "checked": "passed",
        "failed": "failed",
    }


def gate_cfg(root: Path, **gate: Any) -> RunConfig:
    cfg = RunConfig()
    cfg.benchmark = BenchmarkConfig(enabled=True, root=str(root), gate=GateConfig(**gate))
    cfg.compare.n_resamples = 2000
    return cfg


def gated(cfg: RunConfig, root: Path, month: str, jobs: Mapping[JobKey, FinishedJob]) -> bool:
    """The month gated as the monthly command gates it: the gate's files written, its verdict
    printed (`run.monthly.print_gate`); whether it passed."""
    gate = gate_month(cfg, root, month, jobs)
    print_gate(month, gate)
    return gate is None or gate.passed


def test_a_failed_month_is_not_the_next_months_baseline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_month(tmp_path, "2026-09", "no baseline", value=1.0)
    bad = write_month(tmp_path, "2026-10", None, value=0.0)
    cfg = gate_cfg(tmp_path)
    assert gated(cfg, tmp_path, "2026-10", month_jobs(bad)) is False
    assert gate_status(bad) == "failed"
    err = capsys.readouterr().err
    assert "GATE FAILED: 2 significant drop(s) beyond tolerance" in err
    # The next month, as bad, is gated against 2026-09, not against the bad month.
    worse = write_month(tmp_path, "2026-11", None, value=0.0)
    assert gated(cfg, tmp_path, "2026-11", month_jobs(worse)) is False
    out = capsys.readouterr().out
    assert (
        f"gate 2026-11 against {tmp_path / '2026-09'} (2026-09: the latest earlier finished "
        "month whose gate passed (the first benchmark month); skipped 2026-10 (gate failed)): "
        "2 checks" in out
    )
    record = json.loads((worse / "gate.json").read_text())
    assert (record["status"], record["baseline"]) == ("failed", str(tmp_path / "2026-09"))
    assert "skipped 2026-10 (gate failed)" in record["baseline_reason"]
    assert "Baseline: " + str(tmp_path / "2026-09") in (worse / "gate.md").read_text()


def test_a_gate_with_no_checks_fails_naming_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_month(tmp_path, "2026-09", "no baseline", dataset="travel")
    month = write_month(tmp_path, "2026-10", None, dataset="synth")
    assert gated(gate_cfg(tmp_path), tmp_path, "2026-10", month_jobs(month)) is False
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "GATE FAILED: no checks: no job and metric of this month could be paired with the "
        "baseline (synth/bm25: no job in the baseline)",
        'GATE FAILED: plan differs from the baseline: benchmark.datasets: ["travel"] -> '
        '["synth"] (allow with benchmark.gate.allow_plan_changes=[benchmark.datasets])',
        "gate 2026-10: FAILED",
    ]
    assert gate_status(month) == "failed"


def test_the_first_month_passes_with_nothing_gated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    month = write_month(tmp_path, "2026-09", None)
    assert gated(gate_cfg(tmp_path), tmp_path, "2026-09", month_jobs(month)) is True
    assert capsys.readouterr().out == (
        "gate 2026-09: no baseline, nothing gated (no earlier finished month: the first "
        "benchmark)\n"
    )
    assert gate_status(month) == "no baseline"


def test_a_disabled_gate_records_the_month_as_not_gated(tmp_path: Path) -> None:
    month = write_month(tmp_path, "2026-09", None)
    assert gate_month(gate_cfg(tmp_path, enabled=False), tmp_path, "2026-09", {}) is None
    assert gate_status(month) == "not gated"


@pytest.fixture
def composer() -> Iterator[None]:
    """Hydra initialised on conf/, as inside the app, for the driver's job composition."""
    register_configs()
    with initialize_config_dir(str(ROOT / "conf"), version_base="1.3"):
        yield


def tiny_beir(folder: Path) -> Path:
    (folder / "qrels").mkdir(parents=True)
    corpus = [{"_id": f"d{i}", "title": "", "text": f"kw{i:03d} 门票 价格"} for i in range(8)]
    queries = [{"_id": f"q{i}", "text": f"kw{i:03d} 门票"} for i in range(8)]
    (folder / "corpus.jsonl").write_text(jsonl_text(corpus), encoding="utf-8")
    (folder / "queries.jsonl").write_text(jsonl_text(queries), encoding="utf-8")
    qrels = "".join(f"q{i}\td{i}\t1\n" for i in range(8))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels)
    return folder


def folders(month_dir: Path, datasets: list[str], *overrides: str) -> dict[str, str]:
    return job_folders(month_dir, compose_jobs(datasets, ["bm25"], list(overrides)))


def test_a_beir_dataset_takes_its_folder_name(composer: None, tmp_path: Path) -> None:
    beir = tiny_beir(tmp_path / "mini-beir")
    month = tmp_path / "bench" / "2026-10"
    assert folders(month, ["beir", "travel"], f"dataset.path={beir}") == {
        "beir": "mini-beir",
        "travel": "travel",
    }
    # dataset.name, when given, wins.
    assert folders(month, ["beir"], f"dataset.path={beir}", "dataset.name=scifact") == {
        "beir": "scifact"
    }


@pytest.mark.parametrize(
    ("overrides", "key", "why"),
    [
        (["dataset.name=../escape"], "dataset.name", "'../escape' is not a single folder name"),
        (["dataset.name=/abs"], "dataset.name", "'/abs' is not a single folder name"),
        (["dataset.name=_runs"], "dataset.name", "'_runs' starts with '_'"),
        (["dataset.name=.hidden"], "dataset.name", "'.hidden' starts with '.'"),
        (["dataset.path=/"], "dataset.path", "is empty"),
    ],
)
def test_a_dataset_folder_outside_the_month_is_refused_naming_the_key(
    composer: None, tmp_path: Path, overrides: list[str], key: str, why: str
) -> None:
    with pytest.raises(ConfigError, match=r"set dataset\.name=NAME") as info:
        folders(tmp_path / "2026-10", ["beir"], "dataset.path=/tmp", *overrides)
    assert info.value.key == key
    assert why in str(info.value)


def test_a_symlink_out_of_the_month_is_refused(composer: None, tmp_path: Path) -> None:
    month = tmp_path / "2026-10"
    month.mkdir()
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", month / "travel")
    with pytest.raises(ConfigError, match="outside") as info:
        folders(month, ["travel"])
    assert info.value.key == "dataset.name"


def test_two_datasets_in_one_folder_are_refused(composer: None, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="datasets travel and policy would share the folder"):
        folders(tmp_path / "2026-10", ["travel", "policy"], "dataset.name=same")


def test_bad_job_configs_are_refused_before_any_work(composer: None) -> None:
    with pytest.raises(ConfigError) as info:
        compose_jobs(["travel"], ["hybird"], [])
    assert info.value.key == "benchmark.retrievers"
    with pytest.raises(ConfigError) as info:
        compose_jobs(["travel"], ["bm25"], ["top_k=0"])
    assert info.value.key == "top_k"


def test_allowed_plan_changes_must_name_a_key(composer: None) -> None:
    jobs = compose_jobs(["travel"], ["bm25"], [])
    entries = ["top_k", "bm25", "encoder.model", "benchmark", "dataset.files.passages.jsonl"]
    check_allowed_changes(entries, jobs)
    with pytest.raises(ConfigError, match="'topk' is no config key") as info:
        check_allowed_changes(["topk"], jobs)
    assert info.value.key == "benchmark.gate.allow_plan_changes"


def test_job_overrides_keep_what_applies_to_every_job() -> None:
    kept = job_overrides(
        [
            "experiment=monthly",
            "benchmark.month=2026-10",
            "benchmark.gate.allow_plan_changes=[top_k]",
            "dataset=travel",
            "retriever=bm25",
            "arms.bm25.k1=0.5",
            "top_k=8",
            "hydra.verbose=true",
        ]
    )
    assert kept == ["arms.bm25.k1=0.5", "top_k=8"]
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


def test_a_rerun_runs_only_the_jobs_that_did_not_finish(tmp_path: Path) -> None:
    month = tmp_path / "2026-10"
    write_job(month / "synth" / "bm25", {"q1": ("pair", 1.0)}, retriever="bm25")
    write_job(month / "synth" / "dense", {"q1": ("pair", 1.0)}, retriever="dense")
    (month / "synth" / "dense" / "UNFINISHED").write_text("interrupted (2026-10-01, pid 1)\n")
    # hybrid never started
    todo = jobs_to_run(month, ["travel", "policy"], ["bm25", "dense", "hybrid"])
    assert todo == {"travel": ["dense", "hybrid"], "policy": ["bm25", "dense", "hybrid"]}
    (month / "synth" / "dense" / "UNFINISHED").unlink()
    assert jobs_to_run(month, ["travel"], ["bm25", "dense"]) == {}


@pytest.fixture
def orphan_sweep() -> Iterator[subprocess.Popen[bytes]]:
    """A process group of its own, as a month's sweep runs in, whose driver is gone: a real
    process that sleeps until the test stops it."""
    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_a_rerun_refuses_while_an_earlier_runs_sweep_is_alive_naming_its_pids(
    tmp_path: Path, orphan_sweep: subprocess.Popen[bytes]
) -> None:
    state = {"runs": [{"started": "x"}, {"started": "y", "sweeps": [sweep_record(orphan_sweep)]}]}
    with pytest.raises(BenchmarkError) as raised:
        refuse_live_sweeps(tmp_path, state)
    pid = orphan_sweep.pid
    assert str(raised.value) == (
        f"{tmp_path}: the jobs an earlier run of this month started are still running "
        f"(pids {pid}) though that run is gone; wait for them to end, or stop them "
        f"(kill {pid}), then rerun"
    )
    # A later process given the same pid (another start time) is not the sweep.
    reused = {**sweep_record(orphan_sweep), "started": "0"}
    refuse_live_sweeps(tmp_path, {"runs": [{"sweeps": [reused]}]})
    orphan_sweep.kill()
    orphan_sweep.wait()
    refuse_live_sweeps(tmp_path, state)  # gone: the rerun may start


# --- App level: python -m run experiment=monthly ---------------------------------------------


def monthly(root: Path, data: list[str], month: str, *extra: str, cwd: Path = ROOT):
    return run_app(
        [
            "experiment=monthly",
            f"benchmark.month={month}",
            f"benchmark.root={root}",
            "benchmark.retrievers=[bm25]",
            *data,
            *extra,
        ],
        cwd=cwd,
    )


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    tmp = tmp_path_factory.mktemp("monthly-data")
    return [*write_synthetic(tmp), f"cache_dir={tmp / 'cache'}"]


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory, data: list[str]):
    root = tmp_path_factory.mktemp("benchmarks")
    first = monthly(root, data, "2026-09")
    second = monthly(root, data, "2026-10", *WEAKENED)
    return root, first, second


@pytest.mark.slow
def test_first_month_has_nothing_to_gate_against(history) -> None:
    root, first, _ = history
    assert first.returncode == 0, first.stderr
    assert "gate 2026-09: no baseline, nothing gated" in first.stdout
    month = root / "2026-09"
    job = month / "synth" / "bm25"
    for name in ("metrics.json", "manifest.json", "report.md", "rankings.jsonl"):
        assert (job / name).is_file(), name
    assert (month / "synth" / "comparison.md").is_file()
    state = json.loads((month / "benchmark.json").read_text())
    assert state["status"] == "finished" and state["month"] == "2026-09"
    assert state["plan"]["retrievers"] == ["bm25"]
    assert json.loads((month / "gate.json").read_text())["status"] == "no baseline"


@pytest.mark.slow
def test_injected_regression_fails_the_gate_naming_metric_type_and_drop(history) -> None:
    root, _, second = history
    assert second.returncode == 1, second.stdout + second.stderr
    assert "plan difference (allowed): top_k: 6 -> 1 (synth/bm25)" in second.stdout
    lines = second.stderr.splitlines()
    deep = next(x for x in lines if "type=deep" in x and "recall@6->recall@1" in x)
    assert deep.startswith(
        "REGRESSION: synth retriever=bm25 type=deep recall@6->recall@1: 1.000 -> 0.000 "
        "(drop 1.000 > tolerance 0.02;"
    )
    # 10 queries moved by the same amount: p = 2/2**10 exactly
    # (Holm: tests/unit/benchmark/test_gate_units.py).
    assert "p=0.001953, Holm p=" in deep and deep.endswith("; n=10 queries)")
    assert "type=pair recall@6->recall@1: 1.000 -> 0.500 (drop 0.500" in second.stderr
    # pair ndcg@1 stays 1 (passage a is first): 5 of the 6 checks fail.
    assert lines[-2:] == [
        "GATE FAILED: 5 significant drop(s) beyond tolerance",
        "gate 2026-10: FAILED",
    ]
    gate = json.loads((root / "2026-10" / "gate.json").read_text())
    assert (gate["status"], gate["baseline"]) == ("failed", str(root / "2026-09"))
    assert gate["plan_differences"] == [
        {"key": "top_k", "before": "6", "after": "1", "jobs": ["synth/bm25"], "allowed": True}
    ]
    failed = {(c["query_type"], c["metric"]) for c in gate["failures"]}
    every = {(t, m) for t in ("pair", "deep", "all") for m in ("recall@K", "ndcg@K")}
    assert failed == every - {("pair", "ndcg@K")}


@pytest.mark.slow
def test_trend_report_covers_every_finished_month(history) -> None:
    root, _, _ = history
    png = root / "trend-synth.png"
    assert png.is_file() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    trend = json.loads((root / "trend.json").read_text())
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
    proc = monthly(root, data, "2026-10")  # started with top_k=1
    assert proc.returncode == 2
    assert "was started with another plan" in proc.stderr
    assert "top_k=1" in proc.stderr


@pytest.mark.slow
def test_a_bad_month_is_gated_against_the_last_good_one_until_pinned(
    history, data: list[str], tmp_path: Path
) -> None:
    root = tmp_path / "copy"
    shutil.copytree(history[0], root)
    # 2026-10 failed its gate: a second weakened month is gated against 2026-09 and fails too.
    again = monthly(root, data, "2026-11", *WEAKENED)
    assert again.returncode == 1, again.stdout + again.stderr
    assert (
        f"gate 2026-11 against {root / '2026-09'} (2026-09: the latest earlier finished month "
        "whose gate passed (the first benchmark month); skipped 2026-10 (gate failed))"
    ) in again.stdout
    # Accepting the weaker setting is explicit: pin the month that has it.
    pinned = monthly(root, data, "2026-12", "top_k=1", "benchmark.baseline=2026-10")
    assert pinned.returncode == 0, pinned.stdout + pinned.stderr
    assert (
        f"gate 2026-12 against {root / '2026-10'} (pinned by benchmark.baseline=2026-10 "
        "(its own gate: failed)): 6 checks"
    ) in pinned.stdout
    assert "gate 2026-12: PASSED" in pinned.stdout


@pytest.mark.slow
def test_a_retriever_from_a_config_dir_runs_in_the_months_sweep(
    data: list[str], tmp_path: Path
) -> None:
    """The driver validates its jobs against `--config-dir` and `hydra.searchpath`; the sweep it
    starts is given the same search path, so the jobs find the same retriever."""
    own = tmp_path / "own-conf" / "retriever"
    own.mkdir(parents=True)
    bm25 = (ROOT / "conf" / "retriever" / "bm25.yaml").read_text(encoding="utf-8")
    (own / "own_bm25.yaml").write_text(bm25.replace("name: bm25", "name: own_bm25"))
    more = tmp_path / "more-conf" / "retriever"
    more.mkdir(parents=True)
    (more / "more_bm25.yaml").write_text(bm25.replace("name: bm25", "name: more_bm25"))
    root = tmp_path / "bench"
    result = monthly(
        root,
        data,
        "2026-09",
        "benchmark.retrievers=[own_bm25,more_bm25]",
        f"hydra.searchpath=[file://{more.parent}]",
        "--config-dir",
        str(own.parent),
    )
    assert result.returncode == 0, result.stderr
    [dataset] = [p for p in (root / "2026-09").iterdir() if p.is_dir()]
    for name in ("own_bm25", "more_bm25"):
        manifest = json.loads((dataset / name / "manifest.json").read_text())
        assert manifest["config"]["retriever"]["name"] == name


@pytest.mark.slow
def test_a_beir_month_stays_in_its_root_and_resumes(tmp_path: Path) -> None:
    # As in the report: a relative dataset.path, no dataset.name, a relative root.
    tiny_beir(tmp_path / "mini-beir")
    cwd = tmp_path / "work"
    cwd.mkdir()
    args = ["benchmark.datasets=[beir]", "dataset.path=../mini-beir", f"cache_dir={tmp_path}/c"]
    first = monthly(Path("bench"), args, "2026-10", cwd=cwd)
    assert first.returncode == 0, first.stderr
    job = cwd / "bench" / "2026-10" / "mini-beir" / "bm25"
    manifest = json.loads((job / "manifest.json").read_text())
    assert manifest["dataset"]["name"] == "mini-beir"
    assert sorted(p.name for p in cwd.iterdir()) == ["bench"]
    metrics = job / "metrics.json"
    before = (metrics.stat().st_ino, metrics.stat().st_mtime_ns)
    again = monthly(Path("bench"), args, "2026-10", cwd=cwd)
    assert again.returncode == 0, again.stderr
    assert "benchmark 2026-10: every job already finished; nothing to run" in again.stdout
    assert (metrics.stat().st_ino, metrics.stat().st_mtime_ns) == before
    # A name that would leave the month: exit 2 naming the key, nothing written.
    escape = monthly(Path("bench"), [*args, "dataset.name=../../out"], "2026-11", cwd=cwd)
    assert escape.returncode == 2
    assert "config key 'dataset.name'" in escape.stderr
    assert "'../../out' is not a single folder name" in escape.stderr
    assert not (cwd / "bench" / "2026-11").exists()


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
    assert "running travel (synth) x ['dense']" in resumed.stdout
    assert (bm25.stat().st_ino, bm25.stat().st_mtime_ns) == before
    assert (month / "synth" / "dense" / "report.md").is_file()
    state = json.loads((month / "benchmark.json").read_text())
    assert state["status"] == "finished" and len(state["runs"]) == 2
    # Nothing is left to run a third time.
    again = monthly(root, data, "2026-09", *args)
    assert again.returncode == 0 and "nothing to run" in again.stdout


@pytest.mark.slow
def test_a_killed_driver_takes_its_sweep_with_it_and_a_rerun_resumes(tmp_path: Path) -> None:
    # The month's only job asks a service that holds every answer until released: the sweep
    # is mid-job when the driver is killed with SIGKILL (nothing it can catch).
    release = threading.Event()
    perfect = labelled_answers()

    def respond(body: dict[str, Any]) -> Reply:
        release.wait(300)
        return perfect(body)

    root = tmp_path / "bench"
    month = root / "2026-09"
    with serve(respond) as (url, received):
        args = [
            "experiment=monthly",
            "benchmark.month=2026-09",
            f"benchmark.root={root}",
            "benchmark.retrievers=[service]",
            f"arms.service.url={url}",
            f"cache_dir={tmp_path / 'cache'}",
        ]
        env = {
            **os.environ,
            "HYDRA_FULL_ERROR": "0",
            "PYTHONUNBUFFERED": "1",
            "PYTHONFAULTHANDLER": "1",  # a crash of the sweep shows in `said` below
        }
        driver = subprocess.Popen(
            [sys.executable, "-m", "run", *args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_for(lambda: bool(received) or driver.poll() is not None, "a service request")
            assert driver.poll() is None, driver.communicate()
            [sweep] = json.loads((month / "benchmark.json").read_text())["runs"][-1]["sweeps"]
            assert group_members(sweep["pgid"])  # the sweep runs in a group of its own
        finally:
            driver.kill()
            said = "".join(driver.communicate())  # the sweep's output too: it shares the pipes
        # The sweep dies with its driver (Linux sends it SIGTERM), marking its job.
        wait_for(lambda: not group_members(sweep["pgid"]), "the sweep to stop")
        marker = (month / "travel" / "service" / "UNFINISHED").read_text()
        assert marker.startswith("terminated (SIGTERM) ("), f"{marker!r}; the output:\n{said}"
        release.set()
        again = run_app(args)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "running travel (travel) x ['service']" in again.stdout
    assert (month / "travel" / "service" / "report.md").is_file()


def wait_for(condition: Any, what: str, limit_s: float = 300.0) -> None:
    """Poll `condition` until it holds; fail naming `what` after `limit_s` (a generous bound
    on a shared machine, not a timing assertion)."""
    deadline = time.monotonic() + limit_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"waited {limit_s:.0f} s for {what}")
        time.sleep(0.1)
