"""Finished job folders, read back from their files alone (so any folders can be compared).

A job folder is one holding `metrics.json` or the `UNFINISHED` marker a job writes when it
starts (and rewrites when it fails or is interrupted); it is *finished* when the marker is gone
and `report.md`, the last file a job writes, is there. Folders that are not finished are
skipped, each named with the reason (`JobScan.skipped`): what the marker says, judged against
the living (`jobdir.marker`: a `running` job whose process is gone reads as interrupted), or
which files are missing.

What a job was is read from its Hydra record: `.hydra/overrides.yaml` (what the command line
changed), `.hydra/hydra.yaml` (group choices, job number) and the resolved config in
`manifest.json`. Every file is read by its typed reader (`jobdir.files`); file names come from
`jobdir.names`. Telling the jobs of a set apart (labels) is `jobdir.job_sets`'.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrieval_bench.errors import BenchError
from retrieval_bench.jobdir import marker, names
from retrieval_bench.jobdir.files import (
    JobFolderError,
    read_manifest,
    read_metrics,
    read_scored_answers,
    read_yaml,
)
from retrieval_bench.scoring.registry import is_answer_measure, is_robustness_measure

log = logging.getLogger(__name__)

# The files a finished job has (REPORT_MD, its last, included).
FINISHED_FILES = (names.METRICS, names.MANIFEST, names.REPORT_MD)
_MAX_DEPTH = 4


def is_job_dir(path: Path) -> bool:
    return (path / names.METRICS).is_file() or marker.is_marked(path)


def unfinished_reason(path: Path) -> str | None:
    """Why a job folder is not finished (what its marker says, judged by `jobdir.marker`, or
    which files are missing); None when it is finished."""
    said = marker.marker_state(path)
    if said is not None:
        return f"unfinished: {said}"
    missing = [name for name in FINISHED_FILES if not (path / name).is_file()]
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
        metrics = read_metrics(path)
        manifest = read_manifest(path) or {}
        config = manifest.get("config") or read_yaml(path / names.HYDRA_CONFIG) or {}
        hydra = (read_yaml(path / names.HYDRA_SETTINGS) or {}).get("hydra", {}) or {}
        choices = {
            str(k): str(v)
            for k, v in ((hydra.get("runtime") or {}).get("choices") or {}).items()
            if not str(k).startswith("hydra/") and v is not None
        }
        num = (hydra.get("job") or {}).get("num")
        overrides = parse_overrides(read_yaml(path / names.HYDRA_OVERRIDES) or [])
        return cls(
            path=path,
            metrics=metrics,
            config=config if isinstance(config, dict) else {},
            overrides=overrides,
            choices=choices,
            num=num if isinstance(num, int) else None,
            manifest=manifest,
            answers=read_scored_answers(path) or {},
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
                f"{self.path / names.METRICS}: no stage {name!r} (has: {', '.join(stages)})"
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
        # stable@K: one value per perturbed variant, in metrics.json's robustness section
        robust = self.robustness_rows() if is_robustness_measure(spec) else None
        rows = robust if robust is not None else self.stage(stage).get("per_query")
        if rows is None:
            raise JobFolderError(f"{self.path / names.METRICS}: stage {stage!r} has no per_query")
        return {qid: row[name] for qid, row in rows.items() if row.get(name) is not None}

    def robustness_rows(self) -> dict[str, Any]:
        """metrics.json's `robustness.per_query`: each perturbed variant's row (empty when the
        job ran none)."""
        return dict((self.metrics.get("robustness") or {}).get("per_query") or {})

    def query_types(self, stage: str) -> dict[str, str]:
        rows = self.stage(stage).get("per_query") or {}
        return {qid: str(row.get("query_type", "unknown")) for qid, row in rows.items()}

    def metric_query_types(self, stage: str, spec: str) -> dict[str, str]:
        """`query_types` of the queries `spec` is scored on (an answer metric's: answers.json's,
        which include the no_answer queries refusal is scored on)."""
        if is_robustness_measure(spec):
            return {
                q: str(r.get("query_type", "unknown")) for q, r in self.robustness_rows().items()
            }
        if not is_answer_measure(spec):
            return self.query_types(stage)
        rows = self.answers.get("per_query") or {}
        return {qid: str(row.get("query_type", "unknown")) for qid, row in rows.items()}

    def metric_groups(self, stage: str, spec: str) -> dict[str, dict[str, Any]]:
        """type -> the group dict (`n`, the metric's mean) of one metric, `all` for overall."""
        if is_answer_measure(spec):
            found = (self.answers.get("summary") or {}).get(spec) or {}
        elif is_robustness_measure(spec):
            found = self.metrics.get("robustness") or {}
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
        name = self.resolve_metric(spec)
        if is_robustness_measure(spec):
            return any(name in row for row in self.robustness_rows().values())
        rows = self.stage(stage).get("per_query") or {}
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
        st = (path / names.METRICS).stat()
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


class RescoreError(BenchError):
    """A job's stored rankings cannot be re-scored; names the job and what differs."""
