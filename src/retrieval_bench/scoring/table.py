"""A job's metrics as one long table (`results.csv`, and `results.parquet` when pyarrow is
installed), for pandas, a spreadsheet or any tool that reads CSV rather than metrics.json; a
sweep's folder holds the same table over all its jobs, and `metrics_frame` gives it as a
DataFrame. This module makes the rows; the files are written and read where the job folder's
other files are (`jobdir.results_table`, `jobdir.files.to_dataframe`).

One row per system x stage x query x metric, then the aggregates of the same stage:

    system, stage, scope, query_id, query_type, metric, value

A sweep's table (a sweep's folder, `python -m run.compare --out`) holds its jobs' rows with
what sets their values apart after `system` (`SWEEP_COLUMNS`): the dataset, the scoring unit,
the label snapshot and the job's top_k, the same aspects the comparison never mixes in one
verdict table (`compare.build.comparable_groups`), so two jobs of one system name that scored
documents and passages, or against other labels, stay apart here too.

`scope` is `query` (one query's value), `type` (the mean over one query type's scored queries)
or `overall`; `query_id` is empty on aggregate rows, `query_type` on `overall` rows. `stage` is
a recorded stage (`bm25`, `final`, ...) or `baselines/<name>`. Every per-query number of
metrics.json (`per_query` of the doc metrics and of every family) is a row; an undefined
aggregate (no scored query) has an empty `value`, never 0. The values are metrics.json's, so
the table and the JSON cannot disagree.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Protocol

COLUMNS = ("system", "stage", "scope", "query_id", "query_type", "metric", "value")
SWEEP_COLUMNS = ("system", "dataset", "unit", "labels", "top_k", *COLUMNS[1:])
"""A sweep's table: a job's columns and, after `system`, what the job's values measure (module
doc): `labels` is the short labels hash (manifest `labels.hash`), `top_k` the job's K."""


def result_rows(metrics: Mapping[str, Any], system: str) -> Iterator[tuple[Any, ...]]:
    """The rows of the table (in COLUMNS order) for one job's metrics.json."""
    stages = [(name, stage) for name, stage in metrics["stages"].items()]
    stages += [(f"baselines/{n}", s) for n, s in metrics.get("baselines", {}).items()]
    for name, stage in stages:
        families = [stage, *stage.get("families", {}).values()]
        for part in families:
            for qid, row in part.get("per_query", {}).items():
                qtype = str(row.get("query_type", ""))
                for metric, value in row.items():
                    if _is_metric(metric, value):
                        yield (system, name, "query", qid, qtype, metric, value)
        groups = [("type", t, g) for t, g in stage.get("by_type", {}).items()]
        for scope, qtype, group in [("overall", "", stage.get("overall", {})), *groups]:
            for metric, value in group.items():
                if "@" in metric and (value is None or _is_metric(metric, value)):
                    yield (system, name, scope, "", qtype, metric, value)


def _is_metric(key: str, value: Any) -> bool:
    return "@" in key and isinstance(value, (int, float)) and not isinstance(value, bool)


def system_tag(config: Mapping[str, Any]) -> str:
    """A job's system name, as its TREC runs' tag and the table's `system` column: the
    retriever's name, or `router-<name>` for a routed job."""
    tag = str((config.get("retriever") or {}).get("name", "run"))
    router = str((config.get("router") or {}).get("name", "none"))
    return tag if router == "none" else f"router-{router}"


class SweepJob(Protocol):
    """What the sweep table needs of a finished job (`jobdir.read.FinishedJob` has it)."""

    label: str
    metrics: dict[str, Any]
    manifest: dict[str, Any]

    @property
    def dataset(self) -> str: ...

    @property
    def top_k(self) -> int: ...


def scoring_unit(job: SweepJob) -> str:
    """The unit a job scored (`scoring.unit`: passage or doc)."""
    return str(job.metrics.get("unit") or "passage")


def label_snapshot(job: SweepJob) -> str:
    """The labels a job was scored against, as the short form of its labels hash."""
    from retrieval_bench.data.hashes import short

    return short((job.manifest.get("labels") or {}).get("hash"))


def sweep_rows(jobs: Iterable[SweepJob]) -> list[tuple[Any, ...]]:
    """The sweep's table (`SWEEP_COLUMNS`): every job's rows, `system` being the job's label in
    the comparison (`retriever=bm25`, `top_k=8,retriever=hybrid`, ...), so jobs of one
    retriever that differ in another setting stay apart, and beside it what its values measure
    (dataset, unit, label snapshot, top_k)."""
    rows: list[tuple[Any, ...]] = []
    for job in jobs:
        about = (job.label, job.dataset, scoring_unit(job), label_snapshot(job), job.top_k)
        rows.extend((*about, *row[1:]) for row in result_rows(job.metrics, job.label))
    return rows


def metrics_frame(metrics: Mapping[str, Any], system: str = "run") -> Any:
    """The long table (COLUMNS; one row per system x stage x query x metric, then the
    aggregates) of one job's metrics as a pandas DataFrame, its rows named `system`. `value`
    is float64 (an undefined aggregate is NaN); the other columns are strings. pandas is
    optional: imported here, with a message naming the install when it is missing."""
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("to_dataframe needs pandas: pip install pandas") from None
    frame = pd.DataFrame.from_records(list(result_rows(metrics, system)), columns=list(COLUMNS))
    frame["value"] = pd.to_numeric(frame["value"], errors="raise").astype("float64")
    return frame
