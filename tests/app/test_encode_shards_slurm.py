"""A sharded encode as a SLURM array job on the real cluster (see tests/app/test_slurm.py): the
shards it writes are the bytes local shard jobs write, and the job assembled from them scores
as the same sharded job run locally."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import mini_overrides, run_app
from support.slurm import slurm, submitted

__all__ = ["slurm"]  # the cluster fixture, imported for the test below


def _npy(cache: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((cache / "embeddings").rglob("*.npy"))}


@pytest.mark.slow
def test_sharded_encode_as_a_slurm_array_equals_local_shard_jobs(
    slurm: None, tmp_path: Path
) -> None:
    caches = {}
    for launcher in ("slurm", "basic"):
        sweep = tmp_path / launcher / "sweep"
        overrides = mini_overrides(tmp_path / launcher)
        proc = run_app(
            [
                "-m",
                *overrides,
                "retriever=dense",
                "encoder.shards=2",
                "encoder.shard_only=0,1",
                f"hydra/launcher={launcher}",
                f"hydra.sweep.dir={sweep}",
            ]
        )
        assert proc.returncode == 0, proc.stderr
        caches[launcher] = tmp_path / launcher / "cache"
        if launcher == "slurm":
            (script,) = submitted(sweep)
            assert "#SBATCH --array=0-1%2" in script
            logs = "".join(p.read_text() for p in sweep.glob(".submitit/*/*_log.out"))
            assert "mini: shard 0 of 2 (6 passages): encoded 6" in logs
            assert "mini: shard 1 of 2 (6 passages): encoded 6" in logs
    on_slurm, local = _npy(caches["slurm"]), _npy(caches["basic"])
    assert len(on_slurm) == 2 and on_slurm == local

    metrics = {}
    # slurm: assembled from the array's shards; local: a fresh cache, the shards encoded here
    for name, extra in (("slurm", ["encoder.require_shards=true"]), ("local", [])):
        job = tmp_path / f"job-{name}"
        proc = run_app(
            [
                *mini_overrides(tmp_path / name),
                "retriever=dense",
                "encoder.shards=2",
                *extra,
                f"hydra.run.dir={job}",
            ]
        )
        assert proc.returncode == 0, proc.stderr
        encoded = "0, from cache 12" if name == "slurm" else "12, from cache 0"
        assert f"passages encoded {encoded}" in proc.stdout
        metrics[name] = json.loads((job / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["slurm"] == metrics["local"]
