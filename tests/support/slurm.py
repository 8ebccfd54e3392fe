"""The single-node SLURM cluster the tests run on (`.ci/slurm-up.sh`, which CI runs first): the
`slurm` fixture skips a test with the reason where no node takes jobs (fails it under CI), and
lets one test module use the cluster at a time."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from retrieval_bench.io.locks import file_lock

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
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The cluster, held by one test module at a time: under xdist the workers' SLURM modules
    take turns (a lock file in the run's temp root), so their jobs never queue behind each
    other's on the one node."""
    problem = cluster_problem()
    if problem is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the SLURM tests: {problem}")
        pytest.skip(problem)
    run_root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        run_root = run_root.parent  # shared by the workers of this run
    with file_lock(run_root / "slurm.lock", "the SLURM cluster"):
        yield


def submitted(sweep: Path) -> list[str]:
    """The sbatch scripts submitit wrote for the sweep (one per array)."""
    return [p.read_text() for p in sweep.glob(".submitit/*/*_submission.sh")]
