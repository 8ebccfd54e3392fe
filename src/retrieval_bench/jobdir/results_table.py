"""The long results table as files: `results.csv`, and `results.parquet` when pyarrow is
installed, each written atomically. The rows are `scoring.table`'s (COLUMNS); a job folder's and
a sweep folder's tables are written through `jobdir.write.write_results_table`, beside the
other files of the folder and their readers (`jobdir.files`)."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from retrieval_bench.io.atomic import atomic_write_bytes, atomic_write_text
from retrieval_bench.scoring.table import COLUMNS


def write_table(
    csv_path: Path,
    parquet_path: Path,
    rows: list[tuple[Any, ...]],
    columns: tuple[str, ...] = COLUMNS,
) -> list[Path]:
    """The table of `rows` (in `columns` order: a job's `COLUMNS` or a sweep's
    `SWEEP_COLUMNS`) as CSV (and as Parquet when pyarrow is importable), each written
    atomically; returns the files written."""
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(rows)
    written = [csv_path]
    atomic_write_text(csv_path, text.getvalue())
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:  # Parquet is optional: the CSV holds the same rows.
        return written
    buffer = pa.BufferOutputStream()
    pq.write_table(arrow_table(rows, columns), buffer)
    written.append(parquet_path)
    atomic_write_bytes(parquet_path, buffer.getvalue().to_pybytes())
    return written


# The columns that are numbers (the others are strings): their Arrow and numpy type.
_NUMBERS = {"value": "float64", "top_k": "int64"}


def arrow_schema(columns: tuple[str, ...] = COLUMNS) -> Any:
    """The table's Arrow schema: `value` as float64 (null: undefined), a sweep's `top_k` as
    int64, the other columns as strings."""
    import pyarrow as pa

    return pa.schema([(name, getattr(pa, _NUMBERS.get(name, "string"))()) for name in columns])


def arrow_table(rows: list[tuple[Any, ...]], columns: tuple[str, ...] = COLUMNS) -> Any:
    """`rows` as an Arrow table of `arrow_schema(columns)`, each column built from its buffers.

    Why not `pa.Table.from_pydict`: pyarrow imports pandas on its first conversion of Python
    objects (to tell whether they are pandas'), which every job process paid and has no other
    use for (`python -X importtime -c "import pyarrow as pa; pa.array(['x'])" 2>&1 | grep -w
    pandas`: 0.35-0.56 s on the 2-core VM); from buffers the same table (the same Parquet
    bytes, tests/unit/scoring/test_measures_results_table.py) takes milliseconds."""
    import numpy as np
    import pyarrow as pa

    n = len(rows)
    arrays: list[Any] = []
    for i, name in enumerate(columns):
        kind = _NUMBERS.get(name)
        if kind is not None:
            values = [row[i] for row in rows]
            valid = np.fromiter((v is not None for v in values), dtype=bool, count=n)
            data = np.fromiter((0 if v is None else v for v in values), dtype=kind, count=n)
            nulls = n - int(valid.sum())
            validity = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
            arrays.append(
                pa.Array.from_buffers(
                    getattr(pa, kind)(), n, [validity, pa.py_buffer(data)], null_count=nulls
                )
            )
            continue
        encoded = []
        for row in rows:
            if not isinstance(row[i], str):
                raise TypeError(f"results table column {name!r}: {row[i]!r} is not a string")
            encoded.append(row[i].encode("utf-8"))
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=n), out=offsets[1:])
        if offsets[-1] > np.iinfo(np.int32).max:  # past Arrow's 32-bit string offsets
            return pa.Table.from_pydict(
                {c: [row[j] for row in rows] for j, c in enumerate(columns)},
                schema=arrow_schema(columns),
            )
        buffers = [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(b"".join(encoded))]
        arrays.append(pa.Array.from_buffers(pa.string(), n, buffers, null_count=0))
    return pa.Table.from_arrays(arrays, schema=arrow_schema(columns))
