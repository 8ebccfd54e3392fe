"""Every job folder holds its metrics as one long table (results.csv, results.parquet) whose
rows are exactly metrics.json's numbers."""

from __future__ import annotations

import builtins
import csv
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from retrieval_bench.job.result import JobResult
from retrieval_bench.jobdir.results_table import arrow_schema, arrow_table
from retrieval_bench.jobdir.write import write_results_table
from retrieval_bench.scoring.table import COLUMNS, result_rows


@pytest.fixture
def job(mini_job: tuple[JobResult, Path]) -> Path:
    """The session's mini job (hybrid: bm25, dense, fused and final stages)."""
    return mini_job[1]


def _expected(metrics: dict[str, Any]) -> dict[tuple[str, str, str, str, str], float | None]:
    """(stage, scope, query_id, query_type, metric) -> value, read from metrics.json."""
    out: dict[tuple[str, str, str, str, str], float | None] = {}
    for stage, result in metrics["stages"].items():
        for part in [result, *result.get("families", {}).values()]:
            for qid, row in part["per_query"].items():
                for metric, value in row.items():
                    if "@" in metric and value is not None:
                        out[(stage, "query", qid, row["query_type"], metric)] = float(value)
        groups = [("overall", "", result["overall"])]
        groups += [("type", t, g) for t, g in result["by_type"].items()]
        for scope, qtype, group in groups:
            for metric, value in group.items():
                if "@" in metric:
                    out[(stage, scope, "", qtype, metric)] = value
    return out


def test_csv_rows_are_metrics_json(job: Path) -> None:
    metrics = json.loads((job / "metrics.json").read_text())
    with (job / "results.csv").open() as handle:
        rows = list(csv.reader(handle))
    assert tuple(rows[0]) == COLUMNS
    got = {}
    for system, stage, scope, qid, qtype, metric, value in rows[1:]:
        assert system == "hybrid"
        got[(stage, scope, qid, qtype, metric)] = None if value == "" else float(value)
    assert got == _expected(metrics)  # repr round-trip: the exact floats of metrics.json
    assert ("final", "overall", "", "", "map@6") in got
    families = metrics["stages"]["final"]["families"].values()
    family_metrics = {m for f in families for row in f["per_query"].values() for m in row}
    assert {m for m in family_metrics if "@" in m} <= {key[4] for key in got if key[1] == "query"}
    assert any("@" in m for m in family_metrics)  # the families' rows are there too


def test_parquet_holds_the_csv_rows(job: Path) -> None:
    with (job / "results.csv").open() as handle:
        rows = list(csv.reader(handle))[1:]
    table = pq.read_table(job / "results.parquet").to_pylist()
    assert [tuple(r[c] for c in COLUMNS) for r in table] == [
        (*row[:-1], None if row[-1] == "" else float(row[-1])) for row in rows
    ]


def test_without_pyarrow_only_the_csv_is_written(
    job: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_import = builtins.__import__

    def no_pyarrow(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("pyarrow"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    metrics = json.loads((job / "metrics.json").read_text())
    rows = list(result_rows(metrics, "hybrid"))
    assert write_results_table(tmp_path, rows) == [tmp_path / "results.csv"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.csv"]
    assert (tmp_path / "results.csv").read_bytes() == (job / "results.csv").read_bytes()


def _parquet_bytes(table: Any) -> bytes:
    import pyarrow as pa

    buffer = pa.BufferOutputStream()
    pq.write_table(table, buffer)
    return bytes(buffer.getvalue().to_pybytes())


def test_the_table_from_buffers_is_pyarrows_own_conversion(job: Path) -> None:
    """`arrow_table` builds the columns from their buffers (no pandas import): the same table,
    and the same Parquet bytes, as `pa.Table.from_pydict` on the same rows, for the mini job's
    rows and for the edge cases (undefined, integer and NaN values, non-ASCII and empty keys)."""
    import pyarrow as pa

    metrics = json.loads((job / "metrics.json").read_text())
    edge = [
        ("路由", "final", "type", "", "地点", "ndcg@6", None),
        ("s", "bm25", "query", "q1", "", "found@6", 3),
        ("s", "bm25", "query", "", "", "x@1", float("nan")),
        ("", "", "", "", "", "y@1", -0.0),
    ]
    for rows in (list(result_rows(metrics, "hybrid")), edge, []):
        ours = arrow_table(rows)
        ours.validate(full=True)
        theirs = pa.Table.from_pydict(
            {c: [row[i] for row in rows] for i, c in enumerate(COLUMNS)}, schema=arrow_schema()
        )
        assert ours.schema == theirs.schema
        assert repr(ours.to_pylist()) == repr(theirs.to_pylist())  # NaN != NaN: by repr
        assert _parquet_bytes(ours) == _parquet_bytes(theirs)
    with pytest.raises(TypeError, match="column 'query_id': 7 is not a string"):
        arrow_table([("s", "final", "query", 7, "", "m@1", 1.0)])


def test_writing_the_table_does_not_import_pandas(job: Path, tmp_path: Path) -> None:
    """What the buffers are for: a job process that writes its table never imports pandas."""
    script = (
        "import json, sys; from pathlib import Path\n"
        "from retrieval_bench.jobdir.write import write_results_table\n"
        "from retrieval_bench.scoring.table import result_rows\n"
        f"metrics = json.loads(Path({str(job / 'metrics.json')!r}).read_text())\n"
        f"write_results_table(Path({str(tmp_path)!r}), list(result_rows(metrics, 'hybrid')))\n"
        "assert 'pyarrow' in sys.modules and 'pandas' not in sys.modules, 'pandas imported'\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    assert (tmp_path / "results.parquet").read_bytes() == (job / "results.parquet").read_bytes()


def test_a_sweeps_table_tells_apart_what_its_jobs_measured(job: Path, tmp_path: Path) -> None:
    """Two jobs of one system name, one scored in documents against other labels at another
    K: their rows say so in the sweep table's own columns (CSV and Parquet alike), so no
    reader adds up values that measure different things."""
    from dataclasses import replace

    from retrieval_bench.jobdir.read import FinishedJob
    from retrieval_bench.scoring.table import SWEEP_COLUMNS, sweep_rows

    first = replace(FinishedJob.load(job), label="bm25")
    other = replace(
        first,
        metrics={**first.metrics, "unit": "doc"},
        manifest={**first.manifest, "labels": {"hash": "f" * 64}},
        config={**first.config, "top_k": 3},
    )
    write_results_table(tmp_path, sweep_rows([first, other]), SWEEP_COLUMNS)
    with (tmp_path / "results.csv").open() as handle:
        header, *rows = list(csv.reader(handle))
    assert tuple(header) == SWEEP_COLUMNS
    about = {tuple(row[:5]) for row in rows}
    labels = first.manifest["labels"]["hash"][:12]
    assert about == {
        ("bm25", "mini", "passage", labels, str(first.top_k)),
        ("bm25", "mini", "doc", "f" * 12, "3"),
    }
    half = len(rows) // 2
    assert [r[5:] for r in rows[:half]] == [r[5:] for r in rows[half:]]  # the same values
    assert [r[5:] for r in rows[:half]] == [list(r[1:]) for r in csv.reader(
        (job / "results.csv").open())][1:]  # fmt: skip
    table = pq.read_table(tmp_path / "results.parquet")
    assert table.schema.field("top_k").type == "int64"
    assert [tuple(r[c] for c in SWEEP_COLUMNS) for r in table.to_pylist()] == [
        (*row[:4], int(row[4]), *row[5:-1], None if row[-1] == "" else float(row[-1]))
        for row in rows
    ]
