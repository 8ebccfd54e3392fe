"""A job's metrics as one long table (`results.csv`, and `results.parquet` when pyarrow is
installed), for pandas, a spreadsheet or any tool that reads CSV rather than metrics.json; a
sweep's folder holds the same table over all its jobs, and `metrics_frame` gives it as a
DataFrame. Where the files go is the caller's (`jobdir.write.write_results_table`): this module
is given their paths and reads no folder (`jobdir.files.to_dataframe` reads a job's).

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


def write_table(csv_path: Path, parquet_path: Path, rows: list[tuple[Any, ...]]) -> list[Path]:
    """The table of `rows` as CSV (and as Parquet when pyarrow is importable), each written
    atomically; returns the files written."""
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows(rows)
    written = [csv_path]
    atomic_write_text(csv_path, text.getvalue())
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:  # Parquet is optional: the CSV holds the same rows.
        return written
    buffer = pa.BufferOutputStream()
    pq.write_table(arrow_table(rows), buffer)
    written.append(parquet_path)
    atomic_write_bytes(parquet_path, buffer.getvalue().to_pybytes())
    return written


def arrow_schema() -> Any:
    """The table's Arrow schema: COLUMNS as strings, `value` as float64 (null: undefined)."""
    import pyarrow as pa

    return pa.schema([*((name, pa.string()) for name in COLUMNS[:-1]), ("value", pa.float64())])


def arrow_table(rows: list[tuple[Any, ...]]) -> Any:
    """`rows` as an Arrow table of `arrow_schema()`, each column built from its buffers.

    Why not `pa.Table.from_pydict`: pyarrow imports pandas on its first conversion of Python
    objects (to tell whether they are pandas'), which every job process paid and has no other
    use for (`python -X importtime -c "import pyarrow as pa; pa.array(['x'])" 2>&1 | grep -w
    pandas`: 0.35-0.56 s on the 2-core VM); from buffers the same table (the same Parquet
    bytes, tests/unit/scoring/test_measures_results_table.py) takes milliseconds."""
    import numpy as np
    import pyarrow as pa

    n = len(rows)
    columns: list[Any] = []
    for i, name in enumerate(COLUMNS[:-1]):
        encoded = []
        for row in rows:
            if not isinstance(row[i], str):
                raise TypeError(f"results table column {name!r}: {row[i]!r} is not a string")
            encoded.append(row[i].encode("utf-8"))
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=n), out=offsets[1:])
        if offsets[-1] > np.iinfo(np.int32).max:  # past Arrow's 32-bit string offsets
            return pa.Table.from_pydict(
                {c: [row[j] for row in rows] for j, c in enumerate(COLUMNS)}, schema=arrow_schema()
            )
        buffers = [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(b"".join(encoded))]
        columns.append(pa.Array.from_buffers(pa.string(), n, buffers, null_count=0))
    values = [row[-1] for row in rows]
    valid = np.fromiter((v is not None for v in values), dtype=bool, count=n)
    data = np.fromiter((0.0 if v is None else v for v in values), dtype=np.float64, count=n)
    nulls = n - int(valid.sum())
    validity = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    columns.append(
        pa.Array.from_buffers(pa.float64(), n, [validity, pa.py_buffer(data)], null_count=nulls)
    )
    return pa.Table.from_arrays(columns, schema=arrow_schema())


class SweepJob(Protocol):
    """What the sweep table needs of a finished job (`jobdir.read.FinishedJob` has it)."""

    label: str
    metrics: dict[str, Any]


def sweep_rows(jobs: Iterable[SweepJob]) -> list[tuple[Any, ...]]:
    """The sweep's table: every job's rows, `system` being the job's label in the comparison
    (`retriever=bm25`, `top_k=8,retriever=hybrid`, ...), so jobs of one retriever that differ in
    another setting stay apart."""
    return [row for job in jobs for row in result_rows(job.metrics, job.label)]


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
