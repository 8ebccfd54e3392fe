"""A sweep's robustness table: every job of a dataset as an arm, each kind's variants against
their originals per query type, tested with one family over every arm (`scoring.robustness`,
from each job's metrics.json rows), and the heatmap drawn from it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from retrieval_bench.config.compare import CompareConfig
from retrieval_bench.jobdir import names
from retrieval_bench.jobdir.read import FinishedJob
from retrieval_bench.scoring.robustness import (
    kind_pairs,
    normalised_alike,
    robustness_cells,
    stable_shares,
)
from retrieval_bench.stats.settings import significance_settings
from retrieval_bench.stats.verdicts import ordered_types


def heatmap_name(dataset: str, datasets: int) -> str:
    """The sweep folder's figure: `robustness-<dataset>.png` when it holds several datasets."""
    return names.robustness_png(None if datasets == 1 else dataset)


def robustness_record(jobs: Sequence[FinishedJob], cfg: CompareConfig) -> dict[str, Any] | None:
    """The view (`reports.robustness`) of the jobs that ran variants, labels as arms; None when
    none did. Jobs without variants are named in `missing`."""
    robust = [j for j in jobs if j.metrics.get("robustness")]
    if not robust:
        return None
    first = robust[0].metrics["robustness"]
    metrics = list(first["metrics"])
    pairs: dict[tuple[str, str, str, str], Any] = {}
    alike: set[tuple[str, str, str, str]] = set()
    stable: dict[str, dict[str, dict[str, Any]]] = {}
    kinds: dict[str, None] = {k["kind"]: None for k in first["kinds"] if k.get("scored")}
    for job in robust:
        section = job.metrics["robustness"]
        originals = job.stage(section["stage"]).get("per_query") or {}
        normalised = normalised_alike(section["per_query"])
        for metric in metrics:
            for (kind, qtype), values in kind_pairs(
                originals, section["per_query"], metric
            ).items():
                pairs[(metric, job.label, kind, qtype)] = values
                if (kind, qtype) in normalised:
                    alike.add((metric, job.label, kind, qtype))
                kinds.setdefault(kind, None)
        for (kind, qtype), share in stable_shares(section["per_query"], section["k"]).items():
            stable.setdefault(qtype, {}).setdefault(job.label, {})[kind] = share
    cells: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
    tested = robustness_cells(
        pairs, significance_settings(cfg), cfg.min_queries, cfg.family, alike
    )
    for (metric, arm, kind, qtype), cell in tested.items():
        cells.setdefault(metric, {}).setdefault(qtype, {}).setdefault(arm, {})[kind] = cell
    return {
        "stage": first["stage"],
        "k": first["k"],
        "metrics": metrics,
        "arms": [j.label for j in robust],
        "kinds": list(kinds),
        "types": ordered_types([qtype for (_, _, _, qtype) in pairs]),
        "cells": cells,
        "stable": stable,
        "counts": list(first["kinds"]),
        "family": cfg.family,
        "correction": cfg.correction,
        "missing": [j.label for j in jobs if not j.metrics.get("robustness")],
        "heatmap": None,
    }


def write_robustness_heatmap(out: Path, name: str, record: dict[str, Any]) -> Path | None:
    """The heatmap of `record` (a robustness view) as `out/name`; its name goes into the view,
    where comparison.md links it."""
    from retrieval_bench.reports.robustness import write_heatmap

    written = write_heatmap(record, out / name)
    record["heatmap"] = name if written else None
    return written
