"""`python -m run.track ls`: what the tracker holds, one line per run."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

from retrieval_bench.config.tracking import TrackingConfig
from retrieval_bench.errors import ConfigError
from retrieval_bench.tracking import names as tn
from retrieval_bench.tracking.store import TrackingStore


def list_runs(cfg: TrackingConfig, experiment: str = "") -> Iterator[str]:
    """One line per run of the experiment (every experiment when '' ): its kind, when it
    started, whether it is completely logged, its name and id, its parent, the folder it
    logged, and a job's final nDCG at its top_k."""
    store = TrackingStore.open(cfg)
    experiments = list(store.client.search_experiments(max_results=50000))
    if experiment:
        experiments = [e for e in experiments if e.name == experiment]
        if not experiments:
            known = ", ".join(sorted(e.name for e in store.client.search_experiments()))
            raise ConfigError(
                "experiment", f"{cfg.uri} has no experiment {experiment!r} (has: {known or 'none'})"
            )
    for exp in experiments:
        runs = store.runs(exp.experiment_id)
        yield f"experiment {exp.name} ({exp.experiment_id}): {len(runs)} runs"
        for run in runs:
            tags = run.data.tags
            started = dt.datetime.fromtimestamp(run.info.start_time / 1000).isoformat(
                timespec="seconds"
            )
            complete = "complete" if tags.get(tn.COMPLETE) == "true" else "INCOMPLETE"
            parent = tags.get(tn.PARENT_RUN_ID)
            score = [
                f"{k}={v:.4f}"
                for k, v in sorted(run.data.metrics.items())
                if k.startswith("final/ndcg_at_") and k.endswith("/all")
            ][:1]
            yield "  " + "  ".join(
                part
                for part in (
                    tags.get(tn.KIND, "?"),
                    started,
                    complete,
                    tags.get(tn.RUN_NAME, run.info.run_name or ""),
                    run.info.run_id,
                    f"parent {parent}" if parent else "",
                    *score,
                    tags.get(tn.FOLDER, ""),
                )
                if part
            )
