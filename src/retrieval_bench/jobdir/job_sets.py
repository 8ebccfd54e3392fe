"""A set of finished jobs: split by dataset, and each job told apart by a label.

A job's label is built from the keys whose values differ between the jobs of the set, so it
reads like `retriever=bm25` or `top_k=8,retriever=hybrid`: the comparison names its
configurations so, and a judgment pool says which `<label>:<stage>` ranked a passage where.
Both read it from here (the pool sits below the comparison, so this is not `compare/`'s).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from retrieval_bench.jobdir.read import FinishedJob, canonical

# Keys that never describe what a job measured: where things are stored, how it was run.
# `tracking`: where the results were logged (tracking=mlflow), never what was measured.
IGNORED_KEYS = ("hydra", "cache_dir", "compare", "benchmark", "experiment", "tracking")


def group_by_dataset(jobs: Sequence[FinishedJob]) -> dict[str, list[FinishedJob]]:
    """Jobs by the dataset they ran on (jobs of two datasets are never compared)."""
    groups: dict[str, list[FinishedJob]] = {}
    for job in jobs:
        groups.setdefault(job.dataset, []).append(job)
    return groups


def _ignored(key: str) -> bool:
    root = re.split(r"[./]", key, maxsplit=1)[0]
    return root in IGNORED_KEYS


def varying_keys(jobs: Sequence[FinishedJob]) -> list[str]:
    """Override keys whose effective value differs between the jobs, in first-seen order."""
    keys: dict[str, None] = {}
    for job in jobs:
        for key in job.overrides:
            if not _ignored(key) and not key.startswith("dataset"):
                keys.setdefault(key, None)
    return [k for k in keys if len({job.value_of(k) for job in jobs}) > 1]


def assign_labels(jobs: Sequence[FinishedJob]) -> list[str]:
    """Give each job its `setting` (varying key -> value) and a unique label; returns the keys.

    Fallbacks when the overrides do not tell jobs apart: the retriever name, then the folder.
    """
    keys = varying_keys(jobs)
    for job in jobs:
        job.setting = {k: job.value_of(k) for k in keys}
        job.label = ",".join(f"{k}={v}" for k, v in job.setting.items())
    labels = [j.label for j in jobs]
    if len(set(labels)) == len(labels) and all(labels):
        return keys
    names = [j.value_of("retriever.name") for j in jobs]
    if len(set(names)) == len(names):
        for job, name in zip(jobs, names, strict=True):
            job.setting = {"retriever": name}
            job.label = f"retriever={name}"
        return ["retriever"]
    for job in jobs:
        job.label = job.path.name if not job.label else f"{job.label}#{job.path.name}"
        job.setting = {**job.setting, "job": job.path.name}
    if len({j.label for j in jobs}) < len(jobs):
        for job in jobs:
            job.label = str(job.path)
    return [*keys, "job"]


def flat_config(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Dotted key -> canonical value of a job's resolved config, without the keys that never
    describe what a job measured (where things are stored, how it was run)."""
    out: dict[str, str] = {}
    for name, value in config.items():
        key = f"{prefix}{name}"
        if not prefix and name in IGNORED_KEYS:
            continue
        if isinstance(value, Mapping) and value:
            out.update(flat_config(value, key + "."))
        else:
            out[key] = canonical(value)
    return out
