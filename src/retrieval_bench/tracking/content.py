"""What each kind of folder logs, read from its files alone (no tracker needed to compute it).

A job (`job_content`):
* params: every resolved config value that differs from the schema's default (`arms.bm25.k1`,
  `retriever.arms`, ...), and always `retriever`, `dataset`, `top_k`, `encoder.model`;
* metrics: every number of metrics.json's `overall` and `by_type`, per stage, named
  `<stage>/<metric>/<type>` with `all` for overall (`final/ndcg_at_6/negation`,
  `tracking.names.metric_name`), each at step 0;
* tags: git commit and dirty flag, the labels', queries' and corpus' hashes, each dataset
  file's sha256, the encoder's identity, the machine, the cost figures, the dataset;
* artifacts: report.html, report.md, metrics.json, manifest.json, qrels.trec, the TREC runs,
  the plots, answers.json/md when scored, Hydra's record (`hydra/`) and rankings.jsonl
  compressed (`rankings.jsonl.gz`).

A sweep (`sweep_content`): the comparison's verdicts per type as tags
(`verdict/<metric>/<type>/<configuration>`), each configuration's tier as a metric
(`tier/<metric>/<type>/<configuration>`), comparison.md/json/html and badcases as artifacts.
A month adds its state, gate and trend (`month_content`).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrieval_bench.jobdir import names
from retrieval_bench.jobdir.files import read_json
from retrieval_bench.jobdir.job_sets import flat_config
from retrieval_bench.jobdir.read import FinishedJob
from retrieval_bench.tracking import names as tn

# Params a person filters on, logged whatever their value.
ALWAYS_PARAMS = ("retriever", "dataset", "top_k", "encoder.model")
MAX_PARAM_VALUE = 6000  # MLflow's limit
MAX_TAG_VALUE = 8000


@dataclass(frozen=True)
class Artifact:
    """A file to upload: `source` into the run's folder `into` ('' = its root); `gzip`: the
    file is uploaded compressed, named `name` (else its own name)."""

    source: Path
    into: str = ""
    gzip: bool = False
    name: str = ""

    @property
    def logged_as(self) -> str:
        name = self.name or self.source.name
        return f"{self.into}/{name}" if self.into else name


@dataclass
class RunContent:
    """Everything one run logs."""

    kind: str
    key: str
    name: str
    params: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    artifacts: list[Artifact] = field(default_factory=list)
    # When the folder's results were written (ms): every metric's timestamp, so logging the
    # same folder twice logs the very same values.
    timestamp_ms: int = 0


def default_config() -> dict[str, Any]:
    """The schema's defaults as a plain dict (what a param is compared against)."""
    from omegaconf import OmegaConf

    from retrieval_bench.config import RunConfig

    return OmegaConf.to_container(OmegaConf.structured(RunConfig()))  # type: ignore[return-value]


def job_params(job: FinishedJob, defaults: Mapping[str, Any]) -> dict[str, str]:
    """Config values that differ from the defaults, plus ALWAYS_PARAMS."""
    mine, base = flat_config(job.config), flat_config(defaults)
    params = {key: value for key, value in mine.items() if base.get(key) != value}
    params["retriever"] = job.choices.get("retriever") or job.value_of("retriever.name")
    params["dataset"] = job.dataset
    params["top_k"] = str(job.top_k)
    params["encoder.model"] = job.value_of("encoder.model")
    return {tn.metric_name(k): _cut(v, MAX_PARAM_VALUE) for k, v in params.items()}


def job_metrics(metrics: Mapping[str, Any]) -> dict[str, float]:
    """`<stage>/<metric>/<type or all>` -> value, for every number of every stage's overall and
    by_type (an undefined value, null in metrics.json, is left out: never logged as 0)."""
    out: dict[str, float] = {}
    for stage, record in (metrics.get("stages") or {}).items():
        groups = {**(record.get("by_type") or {}), "all": record.get("overall") or {}}
        for group, values in groups.items():
            for metric, value in (values or {}).items():
                found = number(value)
                if found is not None:
                    out[tn.metric_name(stage, metric, group)] = found
    return out


def job_tags(job: FinishedJob) -> dict[str, str]:
    manifest = job.manifest
    tags: dict[str, str] = {tn.DATASET: job.dataset}
    revision = manifest.get("git_revision")
    if isinstance(revision, str) and revision:
        commit, dirty = revision.removesuffix("-dirty"), revision.endswith("-dirty")
        tags[tn.GIT_COMMIT] = commit
        tags[tn.GIT_DIRTY] = "true" if dirty else "false"
        tags["mlflow.source.git.commit"] = commit
    for key, tag in (
        ("labels", tn.LABELS_HASH),
        ("queries", tn.QUERIES_HASH),
        ("corpus", tn.CORPUS_HASH),
    ):
        value = (manifest.get(key) or {}).get("hash")
        if value:
            tags[tag] = str(value)
    for name, sha in ((manifest.get("dataset") or {}).get("files_sha256") or {}).items():
        tags[tn.metric_name(tn.FILE_HASH_PREFIX + str(name))] = str(sha)
    encoder = (manifest.get("config") or job.config).get("encoder")
    if isinstance(encoder, Mapping):
        text = json.dumps(encoder, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        tags[tn.ENCODER_CACHE_KEY] = hashlib.sha256(text.encode()).hexdigest()
    cost = manifest.get("cost") or {}
    for key, value in _flat(cost.get("machine") or {}).items():
        tags[tn.metric_name(tn.MACHINE_PREFIX + key)] = value
    for key, value in _flat(cost.get("total") or {}).items():
        tags[tn.metric_name("rb.cost." + key)] = value
    return {k: _cut(v, MAX_TAG_VALUE) for k, v in tags.items()}


def job_artifacts(path: Path) -> list[Artifact]:
    """The job folder's files worth keeping, in upload order (metrics.json and manifest.json
    first: what a restored baseline needs)."""
    out = [Artifact(path / n) for n in (names.METRICS, names.MANIFEST)]
    out += [
        Artifact(p, tn.HYDRA_ARTIFACTS) for p in sorted((path / names.HYDRA_DIR).glob("*.yaml"))
    ]
    out += [Artifact(path / n) for n in (names.QRELS, names.ANSWERS_JSON, names.ANSWERS_MD)]
    out += [Artifact(p, names.TREC_DIR) for p in sorted((path / names.TREC_DIR).glob("*"))]
    out += [
        Artifact(p, names.TREC_BASELINES_DIR)
        for p in sorted((path / names.TREC_BASELINES_DIR).glob("*"))
    ]
    out += [Artifact(p, names.PLOTS_DIR) for p in sorted((path / names.PLOTS_DIR).glob("*.png"))]
    out.append(Artifact(path / names.RANKINGS, gzip=True, name=tn.RANKINGS_GZ))
    out += [Artifact(path / n) for n in (names.REPORT_HTML, names.REPORT_MD)]
    return [a for a in out if a.source.is_file()]


def job_content(job: FinishedJob, key: str, defaults: Mapping[str, Any]) -> RunContent:
    return RunContent(
        kind="job",
        key=key,
        name=job.path.name,
        params=job_params(job, defaults),
        metrics=job_metrics(job.metrics),
        tags=job_tags(job),
        artifacts=job_artifacts(job.path),
        timestamp_ms=_mtime_ms(job.path / names.METRICS),
    )


def sweep_content(path: Path, key: str, kind: str = "sweep") -> RunContent:
    """A sweep's parent run: its comparison (when one was built) as tags, metrics, artifacts."""
    content = RunContent(kind=kind, key=key, name=path.name)
    comparison = read_json(path / names.COMPARISON_JSON)
    if comparison is not None:
        content.timestamp_ms = _mtime_ms(path / names.COMPARISON_JSON)
        tags, metrics = comparison_figures(comparison)
        content.tags.update(tags)
        content.metrics.update(metrics)
    files = [names.COMPARISON_JSON, names.COMPARISON_MD, names.BADCASES_JSON, names.BADCASES_MD]
    content.artifacts = [Artifact(path / n) for n in files if (path / n).is_file()]
    content.artifacts += [Artifact(p) for p in sorted(path.glob("comparison*.html"))]
    content.artifacts += [Artifact(p) for p in sorted(path.glob("robustness*.png"))]
    return content


def comparison_figures(comparison: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, float]]:
    """comparison.json's verdicts (tags `verdict/<metric>/<type>/<configuration>`: win, lose,
    tie, ...) and tiers (metrics `tier/<metric>/<type>/<configuration>`: 1 is not beaten by
    any other), per dataset when the sweep spans several."""
    tags: dict[str, str] = {}
    metrics: dict[str, float] = {}
    datasets = comparison.get("datasets") or {}
    for dataset, found in datasets.items():
        prefix = [str(dataset)] if len(datasets) > 1 else []
        for spec, by_type in (found.get("cells") or {}).items():
            for qtype, cell in (by_type or {}).items():
                for label, verdict in ((cell or {}).get("verdicts") or {}).items():
                    name = tn.metric_name("verdict", *prefix, spec, qtype, label)
                    tags[name] = str(verdict)
        for spec, by_type in (found.get("tiers") or {}).items():
            for qtype, cell in (by_type or {}).items():
                for label, tier in ((cell or {}).get("tier_of") or {}).items():
                    found = number(tier)
                    if found is not None:
                        metrics[tn.metric_name("tier", *prefix, spec, qtype, label)] = found
    return tags, metrics


def month_content(dataset_dir: Path, key: str) -> RunContent:
    """One dataset of a benchmark month: its sweep's comparison, plus the month's state, gate
    and the trend (the benchmark root's) as artifacts; its month and gate status as tags."""
    month_dir = dataset_dir.parent
    content = sweep_content(dataset_dir, key, kind="month")
    content.name = f"{month_dir.name}/{dataset_dir.name}"
    content.tags[tn.MONTH] = month_dir.name
    state = read_json(month_dir / names.MONTH_STATE) or {}
    content.tags[tn.MONTH_STATUS] = str(state.get("status") or "unknown")
    gate = read_json(month_dir / names.GATE_JSON)
    if gate is not None:
        content.tags[tn.GATE_STATUS] = str(gate.get("status") or "unknown")
        checks = gate.get("checks") or []
        content.metrics["gate/checks"] = float(len(checks))
        content.metrics["gate/passed"] = 1.0 if gate.get("passed") else 0.0
    for name in (names.MONTH_STATE, names.GATE_JSON, names.GATE_MD):
        if (month_dir / name).is_file():
            content.artifacts.append(Artifact(month_dir / name, tn.MONTH_ARTIFACTS))
    root = month_dir.parent
    trend = [root / names.TREND_JSON, root / names.TREND_MD, *sorted(root.glob("trend-*.png"))]
    content.artifacts += [Artifact(p, tn.TREND_ARTIFACTS) for p in trend if p.is_file()]
    return content


def number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _flat(record: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in record.items():
        if isinstance(value, Mapping):
            out.update(_flat(value, f"{prefix}{key}."))
        elif not isinstance(value, (list, tuple)) and value is not None:
            out[f"{prefix}{key}"] = str(value)
    return out


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _mtime_ms(path: Path) -> int:
    try:
        return int(path.stat().st_mtime * 1000)
    except OSError:
        return 0
