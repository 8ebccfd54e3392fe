"""A real SLURM cluster: a sweep and the monthly job through `hydra/launcher=slurm` give the
same results as the same work run locally, and a request no node can hold is refused.

The cluster is the single-node one `.ci/slurm-up.sh` starts on this machine (CI runs it first).
When there is none and it cannot be started here (SLURM not installed, not root), the cluster
tests skip with the reason, except under CI (CI=true), where they fail: CI must run them.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import mini_overrides, run_app
from support.slurm import slurm, submitted

from retrieval_bench.benchmark.month import launcher_overrides
from retrieval_bench.errors import ConfigError
from run.slurm import Node, check_fits, slurm_fit

__all__ = ["slurm"]  # the cluster fixture, imported for the tests below


def largest_node() -> Node:
    out = subprocess.run(
        ["sinfo", "--noheader", "--Node", "--format", "%c %m"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    nodes = [Node(*map(int, line.split())) for line in out.splitlines()]
    return Node(max(n.cpus for n in nodes), max(n.memory_mb for n in nodes))


def job_outputs(sweep: Path) -> dict[str, dict[str, Any]]:
    """Job folder name -> its metrics.json and rankings.jsonl, parsed."""
    out = {}
    for job in sorted(p.parent for p in sweep.glob("*/metrics.json")):
        rankings = (job / "rankings.jsonl").read_text(encoding="utf-8").splitlines()
        out[job.name] = {
            "metrics": json.loads((job / "metrics.json").read_text(encoding="utf-8")),
            "rankings": [json.loads(line) for line in rankings],
        }
    return out


# --- Without a cluster ------------------------------------------------------------------------


def test_check_fits_names_the_key_a_node_cannot_hold() -> None:
    nodes = [Node(cpus=2, memory_mb=24105), Node(cpus=8, memory_mb=4096)]
    check_fits({"cpus_per_task": 8, "mem_gb": 4}, nodes)
    check_fits({"cpus_per_task": 2, "mem_gb": 23}, nodes)
    with pytest.raises(ConfigError, match=r"'hydra\.launcher\.cpus_per_task'.*16 CPUs"):
        check_fits({"cpus_per_task": 4, "tasks_per_node": 4, "mem_gb": 1}, nodes)
    with pytest.raises(ConfigError, match=r"'hydra\.launcher\.mem_gb'.*24 GB.*largest: 8 CPUs"):
        check_fits({"cpus_per_task": 1, "mem_gb": 24}, nodes)
    # Each alone fits some node, together none.
    with pytest.raises(ConfigError, match=r"8 CPUs and 16 GB on one node"):
        check_fits({"cpus_per_task": 8, "mem_gb": 16}, nodes)
    with pytest.raises(ConfigError, match=r"'hydra\.launcher\.partition'.*partition gpu"):
        check_fits({"partition": "gpu", "cpus_per_task": 1}, [])


def test_slurm_fit_caps_the_default_to_the_largest_node(monkeypatch: pytest.MonkeyPatch) -> None:
    import run.slurm as slurm_module

    nodes = [Node(cpus=2, memory_mb=24105), Node(cpus=1, memory_mb=2048)]
    monkeypatch.setattr(slurm_module, "partition_nodes", lambda partition: nodes)
    assert slurm_fit("cpus", 4) == 2
    assert slurm_fit("mem_gb", 16) == 16
    assert slurm_fit("mem_gb", 64) == 23
    monkeypatch.setattr(slurm_module, "partition_nodes", lambda partition: None)
    assert slurm_fit("cpus", 4) == 4  # no cluster: the default as written
    with pytest.raises(ConfigError, match="slurm_fit"):
        slurm_fit("gpus", 1)


def test_launcher_settings_become_hydra_launcher_overrides() -> None:
    settings = {"partition": "gpu a", "cpus_per_task": 8, "exclude": None, "x": True}
    assert launcher_overrides(settings) == [
        "hydra.launcher.partition='gpu a'",
        "hydra.launcher.cpus_per_task=8",
        "hydra.launcher.exclude=null",
        "hydra.launcher.x=true",
    ]


# --- On the cluster ---------------------------------------------------------------------------


@pytest.mark.slow
def test_the_shipped_request_fits_and_an_impossible_one_exits_2(slurm, tmp_path: Path) -> None:
    node = largest_node()
    sweep = tmp_path / "sweep"
    shown = run_app(
        [
            "hydra/launcher=slurm",
            f"hydra.sweep.dir={sweep}",
            f"hydra.run.dir={tmp_path / 'run'}",  # --resolve would claim a folder in outputs/
            "--cfg",
            "hydra",
            "--package",
            "hydra.launcher",
            "--resolve",
        ]
    )
    assert shown.returncode == 0, shown.stderr
    assert f"\ncpus_per_task: {min(4, node.cpus)}\n" in shown.stdout
    assert f"\nmem_gb: {min(16, node.mem_gb)}\n" in shown.stdout
    for key, value in (("cpus_per_task", node.cpus + 1), ("mem_gb", node.mem_gb + 1)):
        proc = run_app(
            [
                "-m",
                "retriever=bm25",
                "hydra/launcher=slurm",
                f"hydra.launcher.{key}={value}",
                *mini_overrides(tmp_path),
                f"hydra.sweep.dir={sweep}",
            ]
        )
        assert proc.returncode == 2, proc.stderr
        assert f"config key 'hydra.launcher.{key}'" in proc.stderr
        assert "would wait in the queue forever" in proc.stderr
        assert not submitted(sweep)


@pytest.mark.slow
def test_sweep_on_slurm_equals_the_local_sweep(slurm, tmp_path: Path) -> None:
    sweeps = {}
    for launcher in ("slurm", "basic"):
        sweep = tmp_path / launcher / "sweep"
        proc = run_app(
            [
                "-m",
                "retriever=bm25,dense,hybrid",
                f"hydra/launcher={launcher}",
                *mini_overrides(tmp_path / launcher),
                f"hydra.sweep.dir={sweep}",
            ]
        )
        assert proc.returncode == 0, proc.stderr
        assert "== mini: 3 configurations" in proc.stdout
        sweeps[launcher] = sweep
    on_slurm, local = (job_outputs(sweeps[name]) for name in ("slurm", "basic"))
    assert list(on_slurm) == [
        "0-dataset.name=mini,retriever=bm25",
        "1-dataset.name=mini,retriever=dense",
        "2-dataset.name=mini,retriever=hybrid",
    ]
    assert on_slurm == local
    # The jobs ran as one SLURM array, asking what the shipped config asks of this node.
    node = largest_node()
    (script,) = submitted(sweeps["slurm"])
    assert "#SBATCH --array=0-2%3" in script
    assert f"#SBATCH --cpus-per-task={min(4, node.cpus)}\n" in script
    assert len(list(sweeps["slurm"].glob(".submitit/*_*/*_result.pkl"))) == 3
    comparison, local_comparison = (
        json.loads((sweeps[name] / "comparison.json").read_text())["datasets"]["mini"]
        for name in ("slurm", "basic")
    )
    assert comparison["cells"] == local_comparison["cells"]
    assert (sweeps["slurm"] / "comparison.md").is_file()


@pytest.mark.slow
def test_monthly_job_on_slurm_equals_the_job_run_locally(slurm, tmp_path: Path) -> None:
    root = tmp_path / "benchmarks"
    proc = run_app(
        [
            "experiment=monthly",
            "benchmark.month=2026-09",
            f"benchmark.root={root}",
            "benchmark.retrievers=[bm25]",
            "benchmark.launcher=slurm",
            "+benchmark.launcher_settings.cpus_per_task=1",
            "+benchmark.launcher_settings.mem_gb=2",
            *mini_overrides(tmp_path),
        ]
    )
    assert proc.returncode == 0, proc.stderr
    month = root / "2026-09"
    assert json.loads((month / "benchmark.json").read_text())["status"] == "finished"
    assert (month / "mini" / "comparison.md").is_file()
    assert json.loads((month / "gate.json").read_text())["passed"] is True
    # The job went through SLURM, with the settings given for the month's launcher.
    (script,) = submitted(month / "mini")
    assert "#SBATCH --cpus-per-task=1\n" in script and "#SBATCH --mem=2GB\n" in script
    local = tmp_path / "local"
    job = run_app(["retriever=bm25", *mini_overrides(tmp_path), f"hydra.run.dir={local / 'bm25'}"])
    assert job.returncode == 0, job.stderr
    on_slurm = job_outputs(month / "mini")
    assert list(on_slurm) == ["bm25"]
    assert on_slurm == job_outputs(local)
