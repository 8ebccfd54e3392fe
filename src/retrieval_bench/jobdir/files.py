"""Typed readers of the files a job, sweep or month folder holds, one per file.

Every tool that reads a folder back (compare, the explorer, answers, pool, rescore, the gate,
the monthly driver, `to_dataframe`) reads through these, so a file has one parser and one set
of error messages: a malformed or truncated file fails with a `DataError` naming `<file>:<line>`
(exit 2), never with a stray exception (exit 3).

* `rankings.jsonl`: `read_rankings`, each line through `records.QueryRecord.from_json` (the one
  parser of a rankings line). With the corpus order at hand (`positions`) each stage also gets
  its passage indices, as re-scoring needs; without it each record is the light form the
  explorer, bad cases, pools and answers need (the query as the line recorded it, no labels).
* `metrics.json` (`read_metrics`), `manifest.json` (`read_manifest`), `answers.json`
  (`read_scored_answers`): JSON objects, as written.
* `router.json` (`read_router`): a learned router, through `routing.learned.load_model`.
* `qrels.trec` (`read_job_qrels`), the job's config (`job_config`, typed), its plots
  (`read_plots`), a month's `benchmark.json` and `gate.json` (`read_month_state`,
  `read_gate_record`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from retrieval_bench.config import RunConfig
from retrieval_bench.data.jsonl import read_jsonl
from retrieval_bench.data.trec import Qrels, read_qrels
from retrieval_bench.errors import BenchError, DataError
from retrieval_bench.jobdir import names
from retrieval_bench.records import QueryRecord
from retrieval_bench.routing.learned import RouterModel, load_model


class JobFolderError(BenchError):
    """A folder is not a readable job folder; names the file at fault."""


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object file; None when it does not exist. Malformed or truncated: a DataError
    naming the file and line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:
        raise DataError(path, f"not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise JobFolderError(f"{path}: unreadable: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(
            path, f"malformed JSON: {exc.msg} (column {exc.colno})", exc.lineno
        ) from None
    if not isinstance(data, dict):
        raise DataError(path, f"expected a JSON object, got {type(data).__name__}")
    return data


# PyYAML's safe loader on libyaml's parser where the wheel has it: the same documents, 8x faster
# (a job's .hydra/config.yaml: 13 ms in pure Python; a sweep's comparison and logger read dozens;
# BENCHMARKS.md, Tracking).
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml(path: Path) -> Any:
    """A YAML file (Hydra's records); None when it does not exist."""
    try:
        return yaml.load(path.read_text(encoding="utf-8"), Loader=_SAFE_LOADER)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise JobFolderError(f"{path}: unreadable: {exc}") from None


def read_metrics(job_dir: Path) -> dict[str, Any]:
    """The job's metrics.json; it must be there, with its `stages`."""
    path = job_dir / names.METRICS
    metrics = read_json(path)
    if metrics is None or "stages" not in metrics:
        raise JobFolderError(f"{path}: missing, or has no 'stages'")
    return metrics


def read_manifest(job_dir: Path) -> dict[str, Any] | None:
    """The job's manifest.json; None when it has none."""
    return read_json(job_dir / names.MANIFEST)


def read_scored_answers(job_dir: Path) -> dict[str, Any] | None:
    """The answers.json `python -m run.answers` wrote into the job; None when it has none."""
    return read_json(job_dir / names.ANSWERS_JSON)


def read_job_qrels(job_dir: Path) -> Qrels | None:
    """The labels the job scored against (qrels.trec); None when it has none."""
    try:
        return read_qrels(job_dir / names.QRELS)
    except FileNotFoundError:
        return None


def read_router(job_dir: Path) -> RouterModel:
    """The learned router a `router=learned` job saved (router.json); a job without one, or a
    file that is not one, fails naming the file."""
    path = job_dir / names.ROUTER_MODEL
    if not path.is_file():
        raise DataError(path, "no saved router: the job did not learn one (router=learned)")
    return load_model(path)


def read_rankings(job_dir: Path, positions: Mapping[str, int] | None = None) -> list[QueryRecord]:
    """Every query's record from the job's rankings.jsonl, in file order (module docstring).
    A bad line (malformed, truncated, not a record of this version, a query twice, with
    `positions` a passage outside the corpus) fails naming the file and line."""
    path = job_dir / names.RANKINGS
    records: list[QueryRecord] = []
    first_line: dict[str, int] = {}
    for number, data in read_jsonl(path):
        try:
            record = QueryRecord.from_json(data, positions=positions)
        except KeyError as exc:
            raise DataError(
                path, f"not a rankings line of this version: no {exc}", number
            ) from None
        except (TypeError, ValueError) as exc:
            raise DataError(path, f"not a rankings line of this version: {exc}", number) from None
        qid = record.query.query_id
        if qid in first_line:
            raise DataError(
                path, f"query {qid!r} recorded twice (first on line {first_line[qid]})", number
            )
        first_line[qid] = number
        records.append(record)
    return records


def job_config(job_dir: Path) -> RunConfig:
    """The job's resolved config (`.hydra/config.yaml`, else manifest.json's `config`), typed."""
    path = job_dir / names.HYDRA_CONFIG
    raw = read_yaml(path)  # JobFolderError naming the file when it is unreadable
    if raw is None:
        path = job_dir / names.MANIFEST
        raw = (read_json(path) or {}).get("config")
    if not isinstance(raw, dict):
        raise JobFolderError(f"{path}: holds no job config")
    try:
        merged = OmegaConf.merge(OmegaConf.structured(RunConfig), raw)
        return OmegaConf.to_object(merged)  # type: ignore[return-value]
    except OmegaConfBaseException as exc:
        raise JobFolderError(f"{path}: not a job config of this version: {exc}") from None


def read_plots(job_dir: Path) -> dict[str, bytes]:
    """Every PNG under the job's plots folder, by its path relative to the job folder (the
    link report.md and report.html use)."""
    folder = job_dir / names.PLOTS_DIR
    if not folder.is_dir():
        return {}
    return {f"{names.PLOTS_DIR}/{p.name}": p.read_bytes() for p in sorted(folder.glob("*.png"))}


def read_month_state(month_dir: Path) -> dict[str, Any] | None:
    """A benchmark month's benchmark.json (its plan and status); None when it has none."""
    return read_json(month_dir / names.MONTH_STATE)


def read_gate_record(month_dir: Path) -> dict[str, Any] | None:
    """A benchmark month's gate.json; None when its gate never ran."""
    return read_json(month_dir / names.GATE_JSON)


def to_dataframe(
    source: str | os.PathLike[str] | Mapping[str, Any], system: str | None = None
) -> Any:
    """A job's metrics as the long table (`scoring.table.COLUMNS`) in a pandas DataFrame, from
    a job folder (its metrics.json) or a metrics dict.

    `system` names the rows; by default a folder's system as its manifest says
    (`scoring.table.system_tag`), a dict's `"run"`."""
    from retrieval_bench.scoring.table import metrics_frame, system_tag

    if isinstance(source, Mapping):
        return metrics_frame(source, system or "run")
    folder = Path(source)
    metrics = read_metrics(folder)
    config = (read_manifest(folder) or {}).get("config") or {}
    return metrics_frame(metrics, system or system_tag(config))
