"""The Hydra app itself as a subprocess, on the small fixture: a multirun makes one folder per
job, and a bad config or a bad input stops it with its exit code before it writes. (The same job
in-process: tests/integration/test_job.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import mini_overrides, run_app
from support.datasets import malformed_corpus


@pytest.mark.slow
def test_multirun_makes_one_folder_per_retriever(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    proc = run_app(
        [
            "-m",
            "retriever=bm25,dense,hybrid",
            *mini_overrides(tmp_path),
            f"hydra.sweep.dir={sweep}",
        ]
    )
    assert proc.returncode == 0, proc.stderr
    jobs = sorted(p for p in sweep.iterdir() if (p / "metrics.json").is_file())
    assert len(jobs) == 3
    names = sorted(sorted(json.loads((p / "metrics.json").read_text())["stages"]) for p in jobs)
    assert names == [["bm25", "dense", "final", "fused"], ["bm25", "final"], ["dense", "final"]]


@pytest.mark.slow
def test_bad_config_stops_the_app_before_it_writes(tmp_path: Path) -> None:
    proc = run_app([*mini_overrides(tmp_path), "top_k=0", f"hydra.run.dir={tmp_path / 'run'}"])
    assert proc.returncode != 0
    assert "top_k" in proc.stderr
    assert not (tmp_path / "run" / "metrics.json").exists()


@pytest.mark.slow
def test_bad_input_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    corpus = malformed_corpus(tmp_path)
    proc = run_app(
        [*mini_overrides(tmp_path), f"dataset.corpus={corpus}", f"hydra.run.dir={tmp_path / 'run'}"]
    )
    assert proc.returncode == 2
    assert f"{corpus / 'passages.jsonl'}:4: malformed JSON" in proc.stderr
    assert not (tmp_path / "run" / "metrics.json").exists()
