"""A job's metrics as one long table (`results.csv`, and `results.parquet` when pyarrow is
installed), for pandas, a spreadsheet or any tool that reads CSV rather than metrics.json.

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
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

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
        for scope, qtype, group in [("overall", "", stage["overall"]), *groups]:
            for metric, value in group.items():
                if "@" in metric and (value is None or _is_metric(metric, value)):
                    yield (system, name, scope, "", qtype, metric, value)


def _is_metric(key: str, value: Any) -> bool:
    return "@" in key and isinstance(value, (int, float)) and not isinstance(value, bool)


def write_results(job_dir: Path, metrics: Mapping[str, Any], system: str) -> list[Path]:
    """Write `results.csv` (and `results.parquet` when pyarrow is importable), atomically."""
    rows = list(result_rows(metrics, system))
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows(rows)
    written = [job_dir / "results.csv"]
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
    written.append(job_dir / "results.parquet")
    atomic_write_bytes(written[1], buffer.getvalue().to_pybytes())
    return written
