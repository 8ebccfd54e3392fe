"""A job's metrics as one long table (`results.csv`, and `results.parquet` when pyarrow is
installed), for pandas, a spreadsheet or any tool that reads CSV rather than metrics.json; a
sweep's folder holds the same table over all its jobs, and `to_dataframe` gives it as a
DataFrame.

One row per system x stage x query x metric, then the aggregates of the same stage:

    system, stage, scope, query_id, query_type, metric, value

`scope` is `query` (one query's value), `type` (the mean over one query type's scored queries)
or `overall`; `query_id` is empty on aggregate rows, `query_type` on `overall` rows. `stage` is
a recorded stage (`bm25`, `final`, ...) or `baselines/<name>`. Every per-query number of
metrics.json (`per_query` of the doc metrics and of every family) is a row; an undefined
aggregate (no scored query) has an empty `value`, never 0. The values are metrics.json's, so
the table and the JSON cannot disagree.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

from retrieval_bench.io import atomic_write_bytes, atomic_write_text

COLUMNS = ("system", "stage", "scope", "query_id", "query_type", "metric", "value")


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


def write_results(job_dir: Path, metrics: Mapping[str, Any], system: str) -> list[Path]:
    """Write `results.csv` (and `results.parquet` when pyarrow is importable), atomically."""
    return write_table(job_dir, list(result_rows(metrics, system)))


def write_table(folder: Path, rows: list[tuple[Any, ...]]) -> list[Path]:
    """`results.csv` (and `results.parquet` when pyarrow is importable) of `rows`, atomically."""
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows(rows)
    written = [folder / "results.csv"]
    atomic_write_text(written[0], text.getvalue())
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:  # Parquet is optional: the CSV holds the same rows.
        return written
    columns = {name: [row[i] for row in rows] for i, name in enumerate(COLUMNS)}
    schema = pa.schema([*((name, pa.string()) for name in COLUMNS[:-1]), ("value", pa.float64())])
    buffer = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pydict(columns, schema=schema), buffer)
    written.append(folder / "results.parquet")
    atomic_write_bytes(written[1], buffer.getvalue().to_pybytes())
    return written


class SweepJob(Protocol):
    """What the sweep table needs of a finished job (`compare.jobs.FinishedJob` has it)."""

    label: str
    metrics: dict[str, Any]


def write_sweep_results(sweep_dir: Path, jobs: Iterable[SweepJob]) -> list[Path]:
    """The sweep's table: every job's rows, `system` being the job's label in the comparison
    (`retriever=bm25`, `top_k=8,retriever=hybrid`, ...), so jobs of one retriever that differ in
    another setting stay apart."""
    rows = [row for job in jobs for row in result_rows(job.metrics, job.label)]
    return write_table(sweep_dir, rows)


def to_dataframe(
    source: str | os.PathLike[str] | Mapping[str, Any], system: str | None = None
) -> Any:
    """The long table (COLUMNS; one row per system x stage x query x metric, then the
    aggregates) as a pandas DataFrame, from a job folder or a metrics.json dict.

    `system` names the rows; by default a folder's system as its manifest says
    (`system_tag`), a dict's `"run"`. `value` is float64 (an undefined aggregate is NaN);
    the other columns are strings. pandas is optional: imported here, with a message naming
    the install when it is missing."""
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("to_dataframe needs pandas: pip install pandas") from None
    if isinstance(source, Mapping):
        metrics, name = source, system or "run"
    else:
        folder = Path(source)
        metrics = json.loads((folder / "metrics.json").read_text(encoding="utf-8"))
        manifest_path = folder / "manifest.json"
        config: dict[str, Any] = {}
        if manifest_path.is_file():
            config = json.loads(manifest_path.read_text(encoding="utf-8")).get("config") or {}
        name = system or system_tag(config)
    frame = pd.DataFrame.from_records(list(result_rows(metrics, name)), columns=list(COLUMNS))
    frame["value"] = pd.to_numeric(frame["value"], errors="raise").astype("float64")
    return frame
