"""`python -m run` with an old key spelling: one notice line per old key on stderr, the job runs
as its new spelling would, and manifest.json records what was renamed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import mini_overrides, run_app, run_in_process


@pytest.mark.slow  # starts the app
def test_an_old_key_on_the_command_line_runs_as_its_new_home(tmp_path: Path) -> None:
    job = tmp_path / "old"
    proc = run_app(
        [*mini_overrides(tmp_path), "bm25.k1=0.9", "retriever.rrf_k=20",
         "retriever=bm25", f"hydra.run.dir={job}"]
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    notices = [line for line in proc.stderr.splitlines() if line.startswith("renamed key: ")]
    assert notices == [
        "renamed key: bm25.k1 -> arms.bm25.k1 (the old spelling is read for this release)",
        "renamed key: retriever.rrf_k -> combiners.rrf.k (the old spelling is read for this "
        "release)",
    ]
    manifest = json.loads((job / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["renamed_keys"] == [
        {"old": "bm25.k1", "new": "arms.bm25.k1"},
        {"old": "retriever.rrf_k", "new": "combiners.rrf.k"},
    ]
    assert manifest["config"]["arms"]["bm25"]["k1"] == 0.9
    new, _ = run_in_process(
        [*mini_overrides(tmp_path), "retriever=bm25", "arms.bm25.k1=0.9", "combiners.rrf.k=20"],
        tmp_path / "new",
    )
    old_metrics = json.loads((job / "metrics.json").read_text(encoding="utf-8"))
    assert old_metrics["stages"]["final"]["overall"] == json.loads(
        json.dumps(new.metrics["stages"]["final"]["overall"])
    )
