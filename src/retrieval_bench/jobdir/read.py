"""Finished job folders, read back from their files alone (so any folders can be compared).

A job folder is one holding `metrics.json` or the `UNFINISHED` marker a job writes when it
starts (and rewrites when it fails or is interrupted); it is *finished* when the marker is gone
and `report.md`, the last file a job writes, is there. Folders that are not finished are
skipped, each named with the reason (`JobScan.skipped`).

What a job was is read from its Hydra record: `.hydra/overrides.yaml` (what the command line
changed), `.hydra/hydra.yaml` (group choices, job number) and the
resolved config in `manifest.json`. A job's label is built from the keys whose values differ
between the jobs compared, so it reads like `retriever=bm25` or `top_k=8,retriever=hybrid`.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from retrieval_bench.config import RunConfig
from retrieval_bench.errors import BenchError
from retrieval_bench.scoring.registry import is_answer_measure

log = logging.getLogger(__name__)

FINISHED_MARKERS = ("metrics.json", "manifest.json", "report.md")
# Written into a finished job by `python -m run.answers` (retrieval_bench.answers.score).
ANSWERS_JSON = "answers.json"
# Written at job start, removed after the job's last file: its presence means "not finished".
UNFINISHED_MARKER = "UNFINISHED"
# Keys that never describe what a job measured: where things are stored, how it was run.
IGNORED_KEYS = ("hydra", "cache_dir", "compare", "benchmark", "experiment")
_MAX_DEPTH = 4


class JobFolderError(BenchError):
    """A folder is not a readable job folder; names the file at fault."""


def is_job_dir(path: Path) -> bool:
    return (path / "metrics.json").is_file() or (path / UNFINISHED_MARKER).is_file()


def unfinished_reason(path: Path) -> str | None:
    """Why a job folder is not finished (what its marker says, or which files are missing);
    None when it is finished."""
    marker = path / UNFINISHED_MARKER
    if marker.is_file():
        try:
            said = marker.read_text(encoding="utf-8").strip().splitlines()
        except OSError as exc:
            said = [f"marker unreadable: {exc.strerror}"]
        return f"unfinished: {said[0] if said else 'marker is empty'}"
    missing = [name for name in FINISHED_MARKERS if not (path / name).is_file()]
    if missing:
        return f"unfinished: no {', '.join(missing)}"
    return None


def is_finished(path: Path) -> bool:
    return unfinished_reason(path) is None


def canonical(value: Any) -> str:
    """One spelling per value, whether it came from an override string or a YAML config."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return str(value)


def _read_yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, yaml.YAMLError) as exc:
        raise JobFolderError(f"{path}: unreadable: {exc}") from None


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise JobFolderError(f"{path}: unreadable JSON: {exc}") from None


def parse_overrides(lines: Iterable[str]) -> dict[str, str]:
    """`key=value` command-line overrides as a dict (`+`/`++` dropped, `~key` -> `(deleted)`)."""
    out: dict[str, str] = {}
    for line in lines:
        text = str(line).strip()
        if text.startswith("~"):
            out[text[1:].partition("=")[0]] = "(deleted)"
            continue
        key, sep, value = text.lstrip("+").partition("=")
        if sep:
            out[key] = value.strip()
    return out


def _ignored(key: str) -> bool:
    root = re.split(r"[./]", key, maxsplit=1)[0]
    return root in IGNORED_KEYS


@dataclass
class FinishedJob:
    """One job folder's record: what was run, and its scores."""

    path: Path
    metrics: dict[str, Any]
    config: dict[str, Any]
    overrides: dict[str, str]
    choices: dict[str, str]
    num: int | None
    label: str = ""
    setting: dict[str, str] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict)
    # answers.json (`python -m run.answers`), when the job's answers were scored: where the
    # answer metrics (the registry's `answer` family) are read from, whatever the stage.
    answers: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load(cls, path: str | Path) -> FinishedJob:
        path = Path(path)
        metrics = _read_json(path / "metrics.json")
        if not isinstance(metrics, dict) or "stages" not in metrics:
            raise JobFolderError(f"{path / 'metrics.json'}: missing, or has no 'stages'")
        manifest = _read_json(path / "manifest.json") or {}
        config = manifest.get("config") or _read_yaml(path / ".hydra" / "config.yaml") or {}
        hydra = (_read_yaml(path / ".hydra" / "hydra.yaml") or {}).get("hydra", {}) or {}
        choices = {
            str(k): str(v)
            for k, v in ((hydra.get("runtime") or {}).get("choices") or {}).items()
            if not str(k).startswith("hydra/") and v is not None
        }
        num = (hydra.get("job") or {}).get("num")
        overrides = parse_overrides(_read_yaml(path / ".hydra" / "overrides.yaml") or [])
        return cls(
            path=path,
            metrics=metrics,
            config=config if isinstance(config, dict) else {},
            overrides=overrides,
            choices=choices,
            num=num if isinstance(num, int) else None,
            manifest=manifest,
            answers=_read_json(path / ANSWERS_JSON) or {},
        )

    @property
    def dataset(self) -> str:
        name = (self.manifest.get("dataset") or {}).get("name")
        return str(name or (self.config.get("dataset") or {}).get("name") or "dataset")

    @property
    def top_k(self) -> int:
        top_k = self.config.get("top_k")
        if isinstance(top_k, int):
            return top_k
        cutoffs = self.metrics.get("cutoffs") or []
        if not cutoffs:
            raise JobFolderError(f"{self.path}: cannot tell its top_k (no config, no cutoffs)")
        return int(min(cutoffs))

    def stage(self, name: str) -> dict[str, Any]:
        stages = self.metrics["stages"]
        if name not in stages:
            raise JobFolderError(
                f"{self.path / 'metrics.json'}: no stage {name!r} (has: {', '.join(stages)})"
            )
        return stages[name]

    def resolve_metric(self, spec: str) -> str:
        """`recall@K` -> `recall@<this job's top_k>`; explicit cut-offs stay as they are."""
        metric, _, k = spec.partition("@")
        return f"{metric}@{self.top_k}" if k == "K" else spec

    def per_query(self, stage: str, spec: str) -> dict[str, float]:
        """query id -> value of one metric at one stage, for the queries that stage scored
        (an answer metric: the queries its answers.json scored)."""
        if is_answer_measure(spec):
            answered = self.answers.get("per_query") or {}
            return {q: row[spec] for q, row in answered.items() if row.get(spec) is not None}
        name = self.resolve_metric(spec)
        rows = self.stage(stage).get("per_query")
        if rows is None:
            raise JobFolderError(f"{self.path / 'metrics.json'}: stage {stage!r} has no per_query")
        return {qid: row[name] for qid, row in rows.items() if row.get(name) is not None}

    def query_types(self, stage: str) -> dict[str, str]:
        rows = self.stage(stage).get("per_query") or {}
        return {qid: str(row.get("query_type", "unknown")) for qid, row in rows.items()}

    def metric_query_types(self, stage: str, spec: str) -> dict[str, str]:
        """`query_types` of the queries `spec` is scored on (an answer metric's: answers.json's,
        which include the no_answer queries refusal is scored on)."""
        if not is_answer_measure(spec):
            return self.query_types(stage)
        rows = self.answers.get("per_query") or {}
        return {qid: str(row.get("query_type", "unknown")) for qid, row in rows.items()}

    def metric_groups(self, stage: str, spec: str) -> dict[str, dict[str, Any]]:
        """type -> the group dict (`n`, the metric's mean) of one metric, `all` for overall."""
        if is_answer_measure(spec):
            found = (self.answers.get("summary") or {}).get(spec) or {}
        else:
            found = self.stage(stage)
        return {**(found.get("by_type") or {}), "all": found.get("overall") or {}}

    def value_of(self, key: str) -> str:
        """The effective value of a config key: the override if any, else the group choice,
        else the resolved config value."""
        if key in self.overrides:
            return self.overrides[key]
        if key in self.choices:
            return self.choices[key]
        node: Any = self.config
        for part in key.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return "(unset)"
            node = node[part]
        return canonical(node)

    def has_metric(self, stage: str, spec: str) -> bool:
        if is_answer_measure(spec):
            return any(spec in row for row in (self.answers.get("per_query") or {}).values())
        rows = self.stage(stage).get("per_query") or {}
        name = self.resolve_metric(spec)
        return any(name in row for row in rows.values()) or not rows


def find_job_dirs(root: Path) -> list[Path]:
    """Job folders at or below `root` (hidden and `_`-prefixed folders skipped)."""
    if is_job_dir(root):
        return [root]
    found: list[Path] = []

    def walk(folder: Path, depth: int) -> None:
        if depth > _MAX_DEPTH:
            return
        try:
            children = sorted(p for p in folder.iterdir() if p.is_dir())
        except OSError:
            return
        for child in children:
            if child.name.startswith((".", "_")):
                continue
            if is_job_dir(child):
                found.append(child)
            else:
                walk(child, depth + 1)

    walk(root, 1)
    return found


Snapshot = dict[str, tuple[int, int]]


def _identity(path: Path) -> tuple[int, int]:
    try:
        st = (path / "metrics.json").stat()
    except FileNotFoundError:
        return 0, 0  # an unfinished job: any later metrics.json differs from this
    return st.st_ino, st.st_mtime_ns


def snapshot(root: Path) -> Snapshot:
    """Which metrics.json files exist under `root` now (inode and mtime of each).

    metrics.json is always replaced atomically (a new inode), so a job rewritten later never
    matches its snapshot entry, whatever the clock or the file system's timestamp resolution.
    """
    if not root.exists():
        return {}
    return {str(d.resolve()): _identity(d) for d in find_job_dirs(root)}


@dataclass
class JobScan:
    """The finished jobs found, and every job folder skipped with its reason."""

    jobs: list[FinishedJob]
    skipped: list[tuple[Path, str]]

    def skipped_lines(self) -> list[str]:
        return [f"skipped {path}: {reason}" for path, reason in self.skipped]


def scan_jobs(paths: Sequence[str | Path], unchanged: Snapshot | None = None) -> JobScan:
    """Every job folder under `paths`: the finished ones loaded, in sweep order (job number,
    then path), the others named with why they were skipped.

    Jobs whose metrics.json is still the one recorded in `unchanged` are skipped: a sweep
    folder reused for a second sweep must not mix the first sweep's jobs into the second's
    verdict.
    """
    jobs: list[FinishedJob] = []
    skipped: list[tuple[Path, str]] = []
    seen: set[Path] = set()
    for raw in paths:
        root = Path(raw)
        if not root.exists():
            raise JobFolderError(f"{root}: no such folder")
        dirs = find_job_dirs(root)
        if not dirs:
            raise JobFolderError(f"{root}: holds no job folder (no metrics.json)")
        for d in dirs:
            resolved = d.resolve()
            if resolved in seen:
                continue
            seen.add(resolved)
            if unchanged and unchanged.get(str(resolved)) == _identity(d):
                skipped.append((d, "not written by this sweep"))
                continue
            reason = unfinished_reason(d)
            if reason is not None:
                skipped.append((d, reason))
                continue
            jobs.append(FinishedJob.load(d))
    jobs.sort(key=lambda j: (j.num if j.num is not None else 1 << 30, str(j.path)))
    return JobScan(jobs, skipped)


def load_jobs(paths: Sequence[str | Path], unchanged: Snapshot | None = None) -> list[FinishedJob]:
    """`scan_jobs`' finished jobs; each skipped folder is logged with its reason."""
    scan = scan_jobs(paths, unchanged)
    for line in scan.skipped_lines():
        log.warning(line)
    return scan.jobs


def group_by_dataset(jobs: Sequence[FinishedJob]) -> dict[str, list[FinishedJob]]:
    groups: dict[str, list[FinishedJob]] = {}
    for job in jobs:
        groups.setdefault(job.dataset, []).append(job)
    return groups


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


class RescoreError(BenchError):
    """A job's stored rankings cannot be re-scored; names the job and what differs."""


def job_config(job_dir: Path) -> RunConfig:
    """The job's resolved config (`.hydra/config.yaml`, else manifest.json's `config`), typed."""
    path = job_dir / ".hydra" / "config.yaml"
    raw = _read_yaml(path)  # JobFolderError naming the file when it is unreadable
    if raw is None:
        path = job_dir / "manifest.json"
        raw = (_read_json(path) or {}).get("config")
    if not isinstance(raw, dict):
        raise JobFolderError(f"{path}: holds no job config")
    try:
        merged = OmegaConf.merge(OmegaConf.structured(RunConfig), raw)
        return OmegaConf.to_object(merged)  # type: ignore[return-value]
    except OmegaConfBaseException as exc:
        raise JobFolderError(f"{path}: not a job config of this version: {exc}") from None
