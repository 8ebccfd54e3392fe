"""Earlier benchmark months read back from the tracker (`benchmark.baseline_from=tracking`).

A CI runner starts with an empty disk each month; the months before it live in the tracker as
`month` runs (one per dataset, `tracking.sync`), their state, gate and jobs as artifacts.
`restore_months` writes each earlier month's benchmark.json and gate.json into a folder of
months (`<benchmark.root>/.tracked/<YYYY-MM>/`), so the folder gate's own rule picks the
baseline (`benchmark.history.resolve_baseline`: the latest earlier finished month whose gate
passed); `restore_jobs` then writes that month's job folders back file for file (Hydra's
record, metrics.json, manifest.json, rankings.jsonl, ...), so the gate compares exactly what it
would have compared had the month been on disk.
"""

from __future__ import annotations

import gzip
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from retrieval_bench.config.benchmark import MONTH
from retrieval_bench.config.tracking import TrackingConfig
from retrieval_bench.jobdir import names
from retrieval_bench.tracking import names as tn
from retrieval_bench.tracking.store import TrackingStore

_MONTH_RUNS = f"tags.`{tn.KIND}` = 'month' and tags.`{tn.COMPLETE}` = 'true'"


def _month_runs(store: TrackingStore, experiments: Sequence[str]) -> dict[str, list[Any]]:
    """YYYY-MM -> its completely logged month runs (one per dataset), across `experiments`."""
    by_month: dict[str, list[Any]] = {}
    for name in experiments:
        found = store.client.get_experiment_by_name(name)
        if found is None or found.lifecycle_stage == "deleted":
            continue
        for run in store.runs(found.experiment_id, _MONTH_RUNS):
            month = run.data.tags.get(tn.MONTH, "")
            if MONTH.fullmatch(month):
                by_month.setdefault(month, []).append(run)
    return by_month


def restore_months(
    cfg: TrackingConfig, experiments: Sequence[str], before: str, into: Path
) -> list[str]:
    """Each month earlier than `before` that the tracker holds, as `into/<month>/` with its
    benchmark.json and gate.json (replacing what an earlier restore left); returns the months."""
    store = TrackingStore.open(cfg)
    months = {m: runs for m, runs in _month_runs(store, experiments).items() if m < before}
    if into.exists():
        shutil.rmtree(into)
    for month, runs in sorted(months.items()):
        with tempfile.TemporaryDirectory(prefix="rb-month-") as tmp:
            got = store.download(runs[0].info.run_id, tn.MONTH_ARTIFACTS, Path(tmp))
            target = into / month
            target.mkdir(parents=True, exist_ok=True)
            for name in (names.MONTH_STATE, names.GATE_JSON, names.GATE_MD):
                if (got / name).is_file():
                    shutil.copyfile(got / name, target / name)
    return sorted(months)


def restore_jobs(cfg: TrackingConfig, experiments: Sequence[str], month_dir: Path) -> list[Path]:
    """The job folders of the restored month `month_dir` (`restore_months`), each written back
    from its run's artifacts under its place in the month (`<dataset>/<retriever>`)."""
    store = TrackingStore.open(cfg)
    runs = _month_runs(store, experiments).get(month_dir.name, [])
    jobs: list[Path] = []
    for month_run in runs:
        dataset_folder = month_dir / Path(month_run.data.tags.get(tn.FOLDER, "")).name
        children = store.runs(
            month_run.info.experiment_id,
            f"tags.`{tn.PARENT_RUN_ID}` = '{month_run.info.run_id}' and "
            f"tags.`{tn.KIND}` = 'job' and tags.`{tn.COMPLETE}` = 'true'",
        )
        for child in children:
            relpath = child.data.tags.get(tn.RELPATH) or child.info.run_name
            jobs.append(_restore_job(store, child.info.run_id, dataset_folder / relpath))
    return jobs


def _restore_job(store: TrackingStore, run_id: str, job_dir: Path) -> Path:
    """One job folder from its run's artifacts: `hydra/` back to `.hydra/`, rankings
    decompressed; written next to the target and renamed into place."""
    job_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".restore-", dir=job_dir.parent) as tmp:
        got = store.download(run_id, "", Path(tmp) / "artifacts")
        if (got / tn.HYDRA_ARTIFACTS).is_dir():
            (got / tn.HYDRA_ARTIFACTS).rename(got / names.HYDRA_DIR)
        packed = got / tn.RANKINGS_GZ
        if packed.is_file():
            with gzip.open(packed, "rb") as src, (got / names.RANKINGS).open("wb") as dst:
                shutil.copyfileobj(src, dst)
            packed.unlink()
        if job_dir.exists():
            shutil.rmtree(job_dir)
        got.rename(job_dir)
    return job_dir
