"""The single-node SLURM cluster the tests run on (`.ci/slurm-up.sh`, which CI runs first): the
`slurm` fixture skips a test with the reason where no node takes jobs, and fails it under CI."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SLURM_UP = ROOT / ".ci" / "slurm-up.sh"


def _idle_node() -> bool:
    proc = subprocess.run(
        ["sinfo", "--noheader", "--format", "%t"], capture_output=True, text=True, timeout=30
    )
    return proc.returncode == 0 and bool({"idle", "mix"} & set(proc.stdout.split()))


def cluster_problem() -> str | None:
    """Why no SLURM node takes jobs here (None: one does). Starts the local cluster when SLURM
    is installed and this is root; never installs anything (tests never touch the network)."""
    if shutil.which("sinfo") is None or shutil.which("slurmd") is None:
        return "SLURM is not installed (no sinfo/slurmd); start a cluster: sudo .ci/slurm-up.sh"
    if _idle_node():
        return None
    if os.geteuid() != 0:
        return "no SLURM node is idle, and starting one needs root: sudo .ci/slurm-up.sh"
    proc = subprocess.run([str(SLURM_UP)], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        return f"{SLURM_UP} failed (exit {proc.returncode}): {proc.stderr.strip()[-800:]}"
    return None if _idle_node() else "no SLURM node is idle after .ci/slurm-up.sh"


@pytest.fixture(scope="module")
def slurm() -> None:
    problem = cluster_problem()
    if problem is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must run the SLURM tests: {problem}")
    pytest.skip(problem)


def submitted(sweep: Path) -> list[str]:
    """The sbatch scripts submitit wrote for the sweep (one per array)."""
    return [p.read_text() for p in sweep.glob(".submitit/*/*_submission.sh")]
