"""The names a tracked run is found and read by: tags, metric names, artifact paths.

A run is found again by its key (`KEY`: the folder's identity, `tracking.folders.folder_key`),
never by its name, so re-logging a folder updates its run instead of adding one. `COMPLETE` is
set last, after every metric and artifact: a run without it is half-logged and the next sync
completes it.
"""

from __future__ import annotations

import re

# Tags of every run this project logs.
KEY = "rb.key"  # the folder's stable key (tracking.folders.folder_key)
KIND = "rb.kind"  # job, sweep, month or tune (tracking.folders)
COMPLETE = "rb.complete"  # "true" once everything of the folder is logged
DIGEST = "rb.digest"  # what was logged (tracking.store.content_digest), set with COMPLETE
RELPATH = "rb.relpath"  # a child's folder relative to its parent's (restoring a month)
FOLDER = "rb.folder"  # where the folder was when it was logged
# Job tags: what produced the numbers.
GIT_COMMIT = "rb.git_commit"
GIT_DIRTY = "rb.git_dirty"
LABELS_HASH = "rb.labels_hash"
QUERIES_HASH = "rb.queries_hash"
CORPUS_HASH = "rb.corpus_hash"
FILE_HASH_PREFIX = "rb.file_sha256."  # + the dataset file's name
ENCODER_CACHE_KEY = "rb.encoder_cache_key"
MACHINE_PREFIX = "rb.machine."
DATASET = "rb.dataset"
# A month's runs.
MONTH = "rb.month"  # YYYY-MM
MONTH_STATUS = "rb.month_status"  # benchmark.json's status
GATE_STATUS = "rb.gate"  # gate.json's status: passed, failed, no baseline, not gated
# MLflow's own tags.
PARENT_RUN_ID = "mlflow.parentRunId"
RUN_NAME = "mlflow.runName"
NOTE = "mlflow.note.content"

# The environment variable that gives a sweep's jobs their parent run id, whatever process or
# node the launcher starts them in.
PARENT_ENV = "RETRIEVAL_BENCH_TRACKING_PARENT_RUN_ID"

# Artifact paths: a job's files under the same names as in its folder, except these.
RANKINGS_GZ = "rankings.jsonl.gz"
HYDRA_ARTIFACTS = "hydra"  # the folder's .hydra/ (a dot folder is hidden in the UI)
MONTH_ARTIFACTS = "month"  # a month's benchmark.json, gate.json, gate.md
TREND_ARTIFACTS = "trend"  # the benchmark root's trend.json, trend.md, plots

KINDS = ("job", "sweep", "month", "tune", "trial")

_NOT_ALLOWED = re.compile(r"[^/\w.\- :]")


def metric_name(*parts: str) -> str:
    """One MLflow metric name from its parts: `final/ndcg_at_6/negation`.

    MLflow allows letters, digits, `_ - . : /` and spaces in a name: `@` becomes `_at_` (the
    cut-off stays readable) and any other character `_`; a part that would read as a path
    (`.`, `..`) is quoted by underscores."""
    out = []
    for part in parts:
        text = _NOT_ALLOWED.sub("_", str(part).replace("@", "_at_").replace("/", "_"))
        out.append(f"_{text}_" if text in ("", ".", "..") else text)
    return "/".join(out)
