"""SLURM requests that fit the cluster: no sweep job that can never start.

A job asking more CPUs or memory than any node of its partition has waits in the queue forever
(squeue shows it PENDING, reason Resources), and the sweep with it. So:

- the shipped `conf/hydra/launcher/slurm.yaml` asks `${slurm_fit:cpus,4,...}` CPUs and
  `${slurm_fit:mem_gb,16,...}` GB: the default, capped to the largest node of the partition as
  `sinfo` reports it (the default itself when there is no `sinfo`);
- a request set on the command line (`hydra.launcher.cpus_per_task=8`) is checked when the
  sweep starts (`hydra_plugins.retrieval_bench_launcher.SlurmLauncher`, the launcher that config
  names): when no node of the partition
  has that many CPUs and that much memory, the sweep is refused (exit 2) naming the key,
  before any job is submitted.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from retrieval_bench.errors import ConfigError

_SLURM_LAUNCHER = "SlurmLauncher"
# What `${slurm_fit:RESOURCE,...}` caps: a node's CPUs, or its memory in GB (what submitit's
# mem_gb asks, `--mem=<n>GB`, which SLURM reads as n * 1024 MB).
RESOURCES = ("cpus", "mem_gb")


@dataclass(frozen=True)
class Node:
    cpus: int
    memory_mb: int

    @property
    def mem_gb(self) -> int:
        return self.memory_mb // 1024


def partition_nodes(partition: str | None) -> list[Node] | None:
    """The nodes of `partition` (the default one when None) as `sinfo` reports them; None when
    `sinfo` is absent or fails (no cluster here: nothing to fit)."""
    cmd = ["sinfo", "--noheader", "--Node", "--format", "%c %m"]
    if partition:
        cmd += ["--partition", partition]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    nodes = []
    for line in out.splitlines():
        fields = line.replace("+", "").split()
        if len(fields) == 2 and all(f.isdigit() for f in fields):
            nodes.append(Node(int(fields[0]), int(fields[1])))
    return nodes


def slurm_fit(resource: str, default: int, partition: str | None = None) -> int:
    """The `${slurm_fit:RESOURCE,DEFAULT,PARTITION}` resolver: `default`, capped to the largest
    node of the partition (RESOURCE: cpus or mem_gb); `default` when there is no cluster."""
    if resource not in RESOURCES:
        raise ConfigError("hydra.launcher", f"slurm_fit: {resource!r} is not one of {RESOURCES}")
    nodes = partition_nodes(partition)
    if not nodes:
        return default
    largest = max(getattr(node, resource) for node in nodes)
    return max(1, min(default, largest))


def check_fits(launcher: Mapping[str, Any], nodes: list[Node]) -> None:
    """Refuse (ConfigError naming the key) a request no node of `nodes` can hold."""
    partition = launcher.get("partition")
    where = f"partition {partition}" if partition else "the cluster"
    if not nodes:
        raise ConfigError("hydra.launcher.partition", f"sinfo lists no node in {where}")
    tasks = int(launcher.get("tasks_per_node") or 1)
    cpus = int(launcher.get("cpus_per_task") or 1) * tasks
    mem_gb = launcher.get("mem_gb")
    mem_mb = int(mem_gb) * 1024 if mem_gb else 0
    if any(node.cpus >= cpus and node.memory_mb >= mem_mb for node in nodes):
        return
    most_cpus = max(node.cpus for node in nodes)
    most_mem = max(node.mem_gb for node in nodes)
    if cpus > most_cpus:
        key = "hydra.launcher.cpus_per_task"
        what = f"{cpus} CPUs per node"
    elif mem_mb > max(node.memory_mb for node in nodes):
        key = "hydra.launcher.mem_gb"
        what = f"{mem_gb} GB per node"
    else:
        key = "hydra.launcher.cpus_per_task"
        what = f"{cpus} CPUs and {mem_gb} GB on one node"
    raise ConfigError(
        key,
        f"the jobs ask {what}, but no node of {where} has that (largest: {most_cpus} CPUs, "
        f"{most_mem} GB); they would wait in the queue forever",
    )
