"""Every file name of the folders this project writes and reads back, in one place.

Four kinds of folder, each with its files (paths relative to the folder):

* a **job folder** (one `python -m run`, or one job of a sweep or a benchmark month): what
  `jobdir.write.write_job` writes, what Hydra records under `.hydra/`, the `UNFINISHED` marker,
  and what later commands add (`run.rescore`, `run.answers`);
* a **sweep folder** (`-m`, or any folder `run.compare` writes to): the comparison of its jobs
  and their long table; `run.pool` writes its pool there by default (`POOL_*`, any `--out`);
* a **month folder** of the monthly benchmark (`<root>/<YYYY-MM>/`): its state and gate;
* the **benchmark root** (`benchmark.root`): the trend over the months.

A module outside `retrieval_bench.jobdir` never spells one of these names: it takes them from
here (`job_dir / names.METRICS`), or, below this package's layer (reports, scoring), is given
the path by its caller. `tests/unit/jobdir/test_jobdir_names.py` scans `src/` for the literals.
"""

from __future__ import annotations

import re

# -- a job folder -----------------------------------------------------------------------------
# One JSON line per query: every recorded stage's ranking (records.QueryRecord.to_json).
RANKINGS = "rankings.jsonl"
# Every stage's metrics, per query and aggregated (scoring); the file compare and the gate read.
METRICS = "metrics.json"
# The resolved config, dataset hashes, package versions, each arm's record.
MANIFEST = "manifest.json"
# The labels scored against, as TREC qrels.
QRELS = "qrels.trec"
# router=learned: the router fitted on every labelled query (routing.learned.RouterModel),
# which `router.model=<job>/router.json` applies to another job.
ROUTER_MODEL = "router.json"
# One TREC run per recorded stage (`trec/<stage>.run`), and `trec/<stage>.qrels` where a stage
# ran only some of the labelled queries; a router's baselines in their own folder.
TREC_DIR = "trec"
TREC_BASELINES_DIR = f"{TREC_DIR}/baselines"
RUN_SUFFIX = ".run"
QRELS_SUFFIX = ".qrels"
# metrics.json as one long table (scoring.table); in a sweep folder, every job's rows.
RESULTS_CSV = "results.csv"
RESULTS_PARQUET = "results.parquet"
# The job's figures, by the kind `reports.plots` draws, and the folder that holds them.
PLOTS_DIR = "plots"
PLOT_FILES = {
    "refusal": f"{PLOTS_DIR}/refusal.png",
    "per_type": f"{PLOTS_DIR}/per_type_final.png",
    "evidence": f"{PLOTS_DIR}/evidence_curves.png",
    "robustness": f"{PLOTS_DIR}/robustness.png",
}
REPORT_HTML = "report.html"
# The last file a job writes: with the marker gone, its presence means "finished".
REPORT_MD = "report.md"
# Written when a job starts, rewritten when it fails or is interrupted, removed after REPORT_MD
# (jobdir.marker owns its content).
UNFINISHED = "UNFINISHED"
# What Hydra records of the job: the resolved config, its own settings (group choices, job
# number) and the command-line overrides.
HYDRA_DIR = ".hydra"
HYDRA_CONFIG = f"{HYDRA_DIR}/config.yaml"
HYDRA_SETTINGS = f"{HYDRA_DIR}/hydra.yaml"
HYDRA_OVERRIDES = f"{HYDRA_DIR}/overrides.yaml"
# `python -m run.rescore`: the stored rankings scored against newer labels, and which labels.
RESCORED_METRICS = "metrics.rescored.json"
RESCORE_NOTE = "rescore.json"
# A generator's answers dropped into the job folder (the monthly benchmark scores them), and
# what `python -m run.answers` writes.
ANSWERS_INPUT = "answers.jsonl"
ANSWERS_JSON = "answers.json"
ANSWERS_MD = "answers.md"

# -- a sweep folder ---------------------------------------------------------------------------
COMPARISON_MD = "comparison.md"
COMPARISON_JSON = "comparison.json"
# The explorer of a sweep over one dataset; over several, one file per dataset.
COMPARISON_HTML = "comparison.html"
COMPARISON_HTML_OF = "comparison-{}.html"
BADCASES_MD = "badcases.md"
BADCASES_JSON = "badcases.json"
# The robustness heatmap of a sweep whose jobs ran perturbed variants; over several datasets,
# one file per dataset.
ROBUSTNESS_PNG = "robustness.png"
ROBUSTNESS_PNG_OF = "robustness-{}.png"
# (and RESULTS_CSV / RESULTS_PARQUET over every job)

# -- the pool's output folder (`python -m run.pool`, default the sweep folder) -----------------
POOL_JSONL = "pool.jsonl"
POOL_CSV = "pool.csv"

# -- a month folder of the monthly benchmark --------------------------------------------------
# The plan the month was started with, its fingerprint and status.
MONTH_STATE = "benchmark.json"
GATE_JSON = "gate.json"
GATE_MD = "gate.md"
# Held (fcntl) while a benchmark process runs the month.
MONTH_LOCK = ".lock"

# -- the benchmark root -----------------------------------------------------------------------
TREND_MD = "trend.md"
TREND_JSON = "trend.json"
TREND_PNG_OF = "trend-{}.png"
# Earlier months read back from the tracker (benchmark.baseline_from=tracking): one month folder
# each, as the tracker holds it; hidden, so the trend and the folder gate never mistake it for
# a month run here.
TRACKED_DIR = ".tracked"


def comparison_html(dataset: str | None = None) -> str:
    """The explorer of a sweep: `comparison.html`, or per dataset `comparison-<dataset>.html`
    when the sweep spans several (`dataset` given; a group's title may hold spaces and "=",
    as `travel (unit=doc)`, which become "-" in the file name)."""
    if dataset is None:
        return COMPARISON_HTML
    return COMPARISON_HTML_OF.format(re.sub(r"[^\w.-]+", "-", dataset).strip("-"))


def robustness_png(dataset: str | None = None) -> str:
    """A sweep's robustness heatmap: `robustness.png`, or per dataset
    `robustness-<dataset>.png` when the sweep spans several (`dataset` given)."""
    return ROBUSTNESS_PNG if dataset is None else ROBUSTNESS_PNG_OF.format(dataset)


def trend_png(dataset: str) -> str:
    """`trend-<dataset>.png`: one dataset's trend plot in the benchmark root."""
    return TREND_PNG_OF.format(dataset)
