"""`python -m run.tune` as a process, on the shipped travel set: the tuning guide's command
writes tune.json whose every fold's held-out score is a fresh job of the fold's chosen
configuration scored on the fold's test queries, the gap per type, and a tuned.yaml that the
app runs; a bad key exits 2 naming it. Subprocesses: marked slow."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, run_app

from retrieval_bench.api import compose
from retrieval_bench.job.runner import run_job

pytestmark = pytest.mark.slow
GUIDE = ROOT / "docs" / "how-to" / "tune.md"
GUIDE_COMMAND = "python -m run.tune experiment=tune_fusion tune.dir=outputs/tune/travel-rrf"


def tune(args: list[str]) -> subprocess.CompletedProcess[str]:
    return run_app(args, module="run.tune")


def test_the_guide_s_tuning_command_holds_out_each_fold(
    tmp_path: Path, shared_cache: Path
) -> None:
    assert GUIDE_COMMAND in GUIDE.read_text(encoding="utf-8")
    folder = tmp_path / "travel-rrf"
    args = [*GUIDE_COMMAND.split()[3:-1], f"tune.dir={folder}", f"cache_dir={shared_cache}"]
    proc = tune(args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "held-out (mean over folds)" in proc.stdout
    summary = json.loads((folder / "tune.json").read_text(encoding="utf-8"))
    assert summary["dataset"] == "travel" and len(summary["folds"]) == 5
    job = ["experiment=tune_fusion", f"cache_dir={shared_cache}"]
    per_query = {}  # a fresh job per configuration chosen (folds often choose the same)
    for fold in summary["folds"]:
        chosen = tuple(fold["chosen"])
        if chosen not in per_query:
            fresh = run_job(compose([*job, *chosen]))
            per_query[chosen] = fresh.metrics["stages"]["final"]["per_query"]
        values = per_query[chosen]
        test = [values[q]["ndcg@6"] for q in fold["test_ids"]]
        assert math.isclose(fold["test_score"], float(np.mean(test)), abs_tol=1e-12)
    held_out = float(np.mean([f["test_score"] for f in summary["folds"]]))
    assert math.isclose(summary["held_out_score"], held_out, abs_tol=1e-12)
    for row in summary["by_type"].values():
        assert math.isclose(row["gap"], row["tuned_score"] - row["held_out_score"], abs_tol=1e-12)
    run = run_app(
        ["--config-dir", str(folder), "--config-name", "tuned", f"hydra.run.dir={tmp_path / 'job'}",
         f"cache_dir={shared_cache}"]
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    metrics = json.loads((tmp_path / "job" / "metrics.json").read_text(encoding="utf-8"))
    assert math.isclose(
        metrics["stages"]["final"]["overall"]["ndcg@6"], summary["tuned_score"], abs_tol=1e-12
    )


def test_a_bad_key_exits_2_naming_it(tmp_path: Path) -> None:
    proc = tune(["retriever.pool_siz=range(1,101)", f"tune.dir={tmp_path}"])
    assert proc.returncode == 2, proc.stderr
    assert "config key 'tune.space.retriever.pool_siz'" in proc.stderr
    assert "did you mean 'retriever.pool_size'" in proc.stderr


def test_a_tune_dir_that_cannot_hold_a_study_exits_2_naming_it(
    tmp_path: Path, shared_cache: Path
) -> None:
    """Under a regular file: refused before any work. A study file that is not a database:
    named with what to do, and left as it was."""
    (tmp_path / "a-file").write_text("", encoding="utf-8")
    args = ["experiment=tune_fusion", "tune.trials=2", "tune.folds=2", f"cache_dir={shared_cache}"]
    under = tune([*args, f"tune.dir={tmp_path / 'a-file' / 'tuning'}"])
    assert under.returncode == 2, under.stderr
    assert under.stderr.strip().splitlines()[-1] == (
        f"error: config key 'tune.dir': {tmp_path / 'a-file' / 'tuning'} cannot be a folder: "
        f"{tmp_path / 'a-file'} is a file, not a folder"
    )
    folder = tmp_path / "damaged"
    folder.mkdir()
    (folder / "study.sqlite3").write_bytes(b"not a database" * 100)
    damaged = tune([*args, f"tune.dir={folder}"])
    assert damaged.returncode == 2, damaged.stderr
    assert damaged.stderr.strip().splitlines()[-1] == (
        f"error: {folder / 'study.sqlite3'}: the study file is corrupt or truncated (file is not "
        "a database); move it away to start this tuning afresh (its trials are lost), or put "
        "back a copy"
    )
    assert (folder / "study.sqlite3").read_bytes() == b"not a database" * 100
