"""Re-score a finished job's stored rankings against the labels as they are now.

Labels change (a judgment pool is annotated, a label snapshot imported) while the rankings a
job stored in rankings.jsonl stay valid: retrieval never reads the labels, only the corpus and
the queries' text and user role. So a job is re-scored without retrieving again, by the same
function a fresh job scores with (`experiment.score_job`), and gives exactly the metrics a
fresh job on the current labels would (timings aside).

Refused (a `RescoreError`, exit 2) when the stored rankings are not those a fresh job would
produce: the corpus changed since the job ran, or the queries retrieval reads did (which are
run, their text, their user role), each named with the job and both hashes; or the job was
recorded before these hashes were.

The monthly gate (`relabel_baseline`) re-scores its baseline's jobs this way when the labels
changed since the baseline month, so a month is compared with its baseline on one set of labels.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from retrieval_bench.config import DatasetConfig
from retrieval_bench.data.hashes import CORPUS_FILES, hash_record, short
from retrieval_bench.errors import BenchError, ConfigError
from retrieval_bench.io.atomic import atomic_write_json
from retrieval_bench.job.runner import (
    configured_variants,
    load_configured,
    load_labelled,
    score_job,
)
from retrieval_bench.jobdir import names
from retrieval_bench.jobdir.files import (
    JobFolderError,
    job_config,
    read_manifest,
    read_rankings,
)
from retrieval_bench.jobdir.read import FinishedJob, RescoreError, find_job_dirs, is_finished
from retrieval_bench.records import EvalQuery, QueryRecord
from retrieval_bench.routing.rules import load_rule_set

K = TypeVar("K")


@dataclass
class Rescored:
    """One job re-scored: its new metrics and the hashes it was scored with, then and now."""

    job_dir: Path
    metrics: dict[str, Any]
    # The manifest's `labels`/`queries`/`corpus` entries when the job ran, and now.
    before: dict[str, Any]
    after: dict[str, Any]
    dataset: DatasetConfig
    files_sha256: dict[str, str]

    @property
    def labels_changed(self) -> bool:
        return bool(self.before["labels"]["hash"] != self.after["labels"]["hash"])

    def labels_line(self) -> str:
        old, new = self.before["labels"]["hash"], self.after["labels"]["hash"]
        if old == new:
            return f"labels unchanged ({short(new)})"
        return f"labels {short(old)} -> {short(new)}"


def _recorded(job_dir: Path) -> dict[str, Any]:
    manifest = read_manifest(job_dir)
    if manifest is None:
        raise JobFolderError(f"{job_dir / names.MANIFEST}: missing")
    missing = [
        key for key in ("labels", "queries", "corpus") if "hash" not in (manifest.get(key) or {})
    ]
    if missing:
        raise RescoreError(
            f"{job_dir}: recorded before label hashes (manifest.json has no "
            f"{', '.join(k + '.hash' for k in missing)}): re-run the job to re-score it"
        )
    return {key: manifest[key] for key in ("labels", "queries", "corpus")}


def rescore_job(
    job_dir: str | Path, evalset: str | Path | None = None, dataset: DatasetConfig | None = None
) -> Rescored:
    """Score `job_dir`'s rankings.jsonl against the labels its dataset has now (`evalset`: a
    label snapshot to use instead of its configured evaluation set; `dataset`: another job's
    dataset config, as the gate uses the current month's)."""
    job_dir = Path(job_dir)
    before = _recorded(job_dir)
    cfg = job_config(job_dir)
    if dataset is not None:
        cfg.dataset = dataset
    if evalset is not None:
        if cfg.dataset.format == "beir":
            raise ConfigError(
                "--evalset", f"{job_dir} ran on a BEIR folder: its labels are the folder's qrels"
            )
        # A path as the user typed it, from where they are (not from the project root).
        cfg.dataset.evalset = str(Path(evalset).resolve())
    # Hashes first: a job whose corpus or queries changed is refused before its labels are
    # judged (judging another dataset's labels would log every query it excludes).
    data = load_configured(cfg)
    after = hash_record(configured_variants(cfg, data), cfg.dataset.format)
    for key, what in (("corpus", "its corpus"), ("queries", "the queries retrieval reads")):
        old, new = before[key]["hash"], after[key]["hash"]
        if old != new:
            raise RescoreError(
                f"{job_dir}: {what} changed since the job ran ({key} hash {short(old)} then, "
                f"{short(new)} now): its rankings are not what a job would retrieve now; "
                "re-run it instead"
            )
    data, judgements, groups = load_labelled(cfg, data)
    stored = read_stored(job_dir, [p.id for p in data.passages])
    records = stored_records(stored, data.queries, job_dir)
    rule_set = load_rule_set(cfg.router, tuple(cfg.arms), tuple(cfg.combiners))
    metrics = score_job(cfg, data, judgements, groups, records, rule_set)
    return Rescored(job_dir, metrics, before, after, cfg.dataset, dict(data.hashes))


def read_stored(job_dir: Path, passage_ids: Sequence[str]) -> dict[str, QueryRecord]:
    """The job's stored records by query id, each stage with its passage indices in the
    corpus order `passage_ids` (read once; `stored_records` orders them for any labels)."""
    positions = {pid: i for i, pid in enumerate(passage_ids)}
    return {r.query.query_id: r for r in read_rankings(job_dir, positions)}


def stored_records(
    stored: Mapping[str, QueryRecord], queries: Sequence[EvalQuery], job_dir: Path
) -> list[QueryRecord]:
    """The stored records (`read_stored`), in the order a fresh job would rank the queries
    (the evaluation set's), each with its query as the labels now describe it (also how the
    judge's estimates re-score a job under other labels)."""
    absent = [q.query_id for q in queries if q.query_id not in stored]
    if absent:
        raise RescoreError(
            f"{job_dir / names.RANKINGS}: no ranking for {len(absent)} queries, e.g. {absent[:3]}"
        )
    return [dataclasses.replace(stored[q.query_id], query=q) for q in queries]


def write_rescored(rescored: Rescored) -> list[Path]:
    """metrics.rescored.json beside the job's own metrics.json (never replaced: it stays what
    the job measured), and rescore.json saying against which labels and when."""
    job_dir = rescored.job_dir
    metrics_path, note_path = job_dir / names.RESCORED_METRICS, job_dir / names.RESCORE_NOTE
    atomic_write_json(metrics_path, rescored.metrics, indent=None)
    note = {
        "rescored_at": dt.datetime.now().isoformat(timespec="seconds"),
        "metrics": names.RESCORED_METRICS,
        "labels": {
            "then": rescored.before["labels"]["hash"],
            "now": rescored.after["labels"]["hash"],
        },
        "corpus": rescored.after["corpus"],
        "queries": rescored.after["queries"],
        "dataset": dataclasses.asdict(rescored.dataset),
        "files_sha256": rescored.files_sha256,
    }
    atomic_write_json(note_path, note)
    return [metrics_path, note_path]


def rescore_path(path: str | Path, evalset: str | Path | None = None) -> list[Rescored]:
    """Every finished job at or under `path` (a job, a sweep or a benchmark month), re-scored;
    nothing is written, so one refused job leaves every folder as it was."""
    root = Path(path)
    if not root.is_dir():
        raise JobFolderError(f"{root}: no such folder")
    dirs = [d for d in find_job_dirs(root) if is_finished(d)]
    if not dirs:
        raise JobFolderError(f"{root}: holds no finished job folder")
    if evalset is not None:
        names = {FinishedJob.load(d).dataset for d in dirs}
        if len(names) > 1:
            raise ConfigError(
                "--evalset",
                f"{root} holds jobs of {len(names)} datasets ({', '.join(sorted(names))}): "
                "re-score one dataset's folder at a time with --evalset",
            )
    return [rescore_job(d, evalset) for d in dirs]


def relabel_baseline(
    current: Mapping[K, FinishedJob], baseline: Mapping[K, FinishedJob]
) -> tuple[dict[K, FinishedJob], list[str]]:
    """The baseline's jobs, each re-scored against its current namesake's labels when those
    differ from the labels it was scored with, and one line per job saying what was done.

    A re-scored job reads as if it had run on the current labels: its metrics, its manifest's
    labels hash and label files, and its evaluation-set path; its corpus and config otherwise
    stay its own, so any other difference is still the gate's to see. A job that cannot be
    re-scored (its corpus or queries changed) is kept as recorded, and the line says why."""
    out = dict(baseline)
    notes: list[str] = []
    for key, job in baseline.items():
        now = current.get(key)
        if now is None:
            continue
        old_hash = (job.manifest.get("labels") or {}).get("hash")
        new_hash = (now.manifest.get("labels") or {}).get("hash")
        dataset = _labels_of(now)
        same_file = (job.config.get("dataset") or {}).get("evalset") == dataset.evalset
        if old_hash is None or new_hash is None or (old_hash == new_hash and same_file):
            continue
        try:
            rescored = rescore_job(job.path, dataset=dataset)
        except BenchError as exc:
            notes.append(
                f"{key}: labels changed ({short(old_hash)} -> {short(new_hash)}) but the baseline "
                f"could not be re-scored, compared as recorded: {exc}"
            )
            continue
        out[key] = as_rescored(job, rescored)
        notes.append(
            f"{key}: baseline re-scored against current labels: "
            f"{short(old_hash)} -> {short(rescored.after['labels']['hash'])}"
        )
        if job.answers:
            out[key], line = _answers_relabelled(out[key], rescored.dataset)
            notes.append(f"{key}: {line}")
    return out, notes


def _labels_of(job: FinishedJob) -> DatasetConfig:
    """The dataset config a job is measured with: its own, with the evaluation set its record
    names (a job re-scored in memory against a label snapshot, `as_rescored`, names that)."""
    dataset = job_config(job.path).dataset
    evalset = (job.config.get("dataset") or {}).get("evalset")
    if dataset.format != "beir" and evalset:
        dataset.evalset = str(evalset)
    return dataset


def _answers_relabelled(job: FinishedJob, dataset: DatasetConfig) -> tuple[FinishedJob, str]:
    """The baseline's answers (answers.json) re-scored from the answers file it recorded,
    against `dataset`'s current labels; kept as scored, and the line says why, when that file
    is gone or changed."""
    from retrieval_bench.answers import recorded_options
    from retrieval_bench.answers.score import load_job_answers
    from retrieval_bench.data.jsonl import file_sha256
    from retrieval_bench.io.strict_json import strict_json

    source = Path(job.answers["answers"]["path"])
    try:
        if file_sha256(source) != job.answers["answers"]["sha256"]:
            raise BenchError(f"{source} changed since it was scored")
        record = load_job_answers(job.path, source, recorded_options(job.answers), dataset)
    except (BenchError, OSError) as exc:
        return job, f"baseline answers compared as scored, not re-scored: {exc}"
    return (
        dataclasses.replace(job, answers=strict_json(record)),
        "baseline answers re-scored against current labels",
    )


def as_rescored(job: FinishedJob, rescored: Rescored) -> FinishedJob:
    """`job` as if it had run against the labels it was re-scored with: their metrics, labels
    hash, label files and evaluation-set path (its corpus and config otherwise its own)."""
    fmt = rescored.dataset.format
    corpus = CORPUS_FILES.get(fmt, CORPUS_FILES["native"])
    manifest = json.loads(json.dumps(job.manifest))
    dataset = manifest.setdefault("dataset", {})
    old_files = dataset.get("files_sha256") or {}
    dataset["files_sha256"] = {
        **{name: h for name, h in old_files.items() if name in corpus},
        **{name: h for name, h in rescored.files_sha256.items() if name not in corpus},
    }
    manifest["labels"] = rescored.after["labels"]
    config = json.loads(json.dumps(job.config))
    if fmt != "beir":
        for node in (config, manifest.get("config") or {}):
            if isinstance(node.get("dataset"), dict):
                node["dataset"]["evalset"] = rescored.dataset.evalset
    return dataclasses.replace(job, metrics=rescored.metrics, manifest=manifest, config=config)
