"""hydra-submitit-launcher's SLURM launcher, which first checks the jobs can start."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hydra_plugins.hydra_submitit_launcher import submitit_launcher  # type: ignore[import-untyped]

from run.slurm import check_fits, partition_nodes


class SlurmLauncher(submitit_launcher.SlurmLauncher):
    """`hydra/launcher=slurm`: submitit's SlurmLauncher, but a request that fits no node of the
    partition (`run.slurm.check_fits`) is refused (exit 2) before anything is
    submitted. Without `sinfo` there is nothing to check (submitting fails on its own)."""

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Any:
        nodes = partition_nodes(self.params.get("partition"))
        if nodes is not None:
            check_fits(self.params, nodes)
        return super().launch(job_overrides, initial_job_idx)
