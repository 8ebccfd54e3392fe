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
RANKINGS = "rankings.jsonl"
"""One JSON line per query: every recorded stage's ranking (records.QueryRecord.to_json)."""
METRICS = "metrics.json"
"""Every stage's metrics, per query and aggregated (scoring); the file compare and the gate read."""
MANIFEST = "manifest.json"
"""The resolved config, dataset hashes, package versions, each arm's record."""
QRELS = "qrels.trec"
"""The labels scored against, as TREC qrels."""
ROUTER_MODEL = "router.json"
"""router=learned: the router fitted on every labelled query (routing.learned.RouterModel), which
`router.model=<job>/router.json` applies to another job."""
TREC_DIR = "trec"
"""One TREC run per recorded stage (`trec/<stage>.run`), and `trec/<stage>.qrels` where a stage
ran only some of the labelled queries; a router's baselines in their own folder."""
TREC_BASELINES_DIR = f"{TREC_DIR}/baselines"
"""A router's baselines (each arm alone, and their fusion) as TREC runs, one per baseline."""
RUN_SUFFIX = ".run"
"""The suffix of a stage's TREC run under `trec/`."""
QRELS_SUFFIX = ".qrels"
"""The suffix of the qrels of a stage that ran only some of the labelled queries."""
RESULTS_CSV = "results.csv"
"""metrics.json as one long table (scoring.table); in a sweep folder, every job's rows."""
RESULTS_PARQUET = "results.parquet"
"""results.csv as Parquet (with the `tables` extra installed)."""
PLOTS_DIR = "plots"
"""The job's figures, by the kind `reports.plots` draws, and the folder that holds them."""
PLOT_FILES = {
    "refusal": f"{PLOTS_DIR}/refusal.png",
    "per_type": f"{PLOTS_DIR}/per_type_final.png",
    "evidence": f"{PLOTS_DIR}/evidence_curves.png",
    "robustness": f"{PLOTS_DIR}/robustness.png",
}
"""The figures by kind: the refusal threshold curve, the final stage per query type, the evidence
completeness curves, the robustness heatmap (each where the job has what it draws)."""
REPORT_HTML = "report.html"
"""The HTML report: per-type heatmap and the query explorer, one self-contained file."""
REPORT_MD = "report.md"
"""The last file a job writes: with the marker gone, its presence means "finished"."""
UNFINISHED = "UNFINISHED"
"""Written when a job starts, rewritten when it fails or is interrupted, removed after REPORT_MD
(jobdir.marker owns its content)."""
HYDRA_DIR = ".hydra"
"""What Hydra records of the job: the resolved config, its own settings (group choices, job
number) and the command-line overrides."""
HYDRA_CONFIG = f"{HYDRA_DIR}/config.yaml"
"""The job's resolved config, as Hydra wrote it."""
HYDRA_SETTINGS = f"{HYDRA_DIR}/hydra.yaml"
"""Hydra's own settings of the run: the group choices, the job number."""
HYDRA_OVERRIDES = f"{HYDRA_DIR}/overrides.yaml"
"""The command-line overrides the job ran with."""
RESCORED_METRICS = "metrics.rescored.json"
"""`python -m run.rescore`: the stored rankings scored against newer labels, and which labels."""
RESCORE_NOTE = "rescore.json"
"""Which labels `python -m run.rescore` scored against (the snapshot, its hash) and when."""
ANSWERS_INPUT = "answers.jsonl"
"""A generator's answers dropped into the job folder (the monthly benchmark scores them), and
what `python -m run.answers` writes."""
ANSWERS_JSON = "answers.json"
"""The answer metrics `python -m run.answers` computed (per query and aggregated)."""
ANSWERS_MD = "answers.md"
"""The answer metrics as a report."""

# -- a sweep folder ---------------------------------------------------------------------------
COMPARISON_MD = "comparison.md"
"""The comparison of a sweep's jobs: per-type verdicts with significance, tiers, ablations, cost
beside quality."""
COMPARISON_JSON = "comparison.json"
"""The comparison as data, every number of comparison.md."""
COMPARISON_HTML = "comparison.html"
"""The explorer of a sweep over one dataset; over several, one file per dataset."""
COMPARISON_HTML_OF = "comparison-{}.html"
"""The explorer of one dataset of a sweep over several (`comparison-<dataset>.html`)."""
BADCASES_MD = "badcases.md"
"""Bad cases: per query, where each configuration (and each of its arms) put every expected
passage and entity, and what none of them found."""
BADCASES_JSON = "badcases.json"
"""badcases.md as data."""
ROBUSTNESS_PNG = "robustness.png"
"""The robustness heatmap of a sweep whose jobs ran perturbed variants; over several datasets,
one file per dataset."""
ROBUSTNESS_PNG_OF = "robustness-{}.png"
"""The robustness heatmap of one dataset of a sweep over several."""
# (and RESULTS_CSV / RESULTS_PARQUET over every job)

# -- the pool's output folder (`python -m run.pool`, default the sweep folder) -----------------
POOL_JSONL = "pool.jsonl"
"""The judgment pool: the unlabelled (query, passage) pairs the jobs ranked, one JSON line each,
to be graded."""
POOL_CSV = "pool.csv"
"""The same pool as a spreadsheet."""

# -- a month folder of the monthly benchmark --------------------------------------------------
MONTH_STATE = "benchmark.json"
"""The plan the month was started with, its fingerprint and status."""
GATE_JSON = "gate.json"
"""The regression gate's result: each gated metric and type against the baseline month, pass or
fail."""
GATE_MD = "gate.md"
"""The gate's result as a report, every plan difference named."""
MONTH_LOCK = ".lock"
"""Held (fcntl) while a benchmark process runs the month."""

# -- the benchmark root -----------------------------------------------------------------------
TREND_MD = "trend.md"
"""Every finished month's gated metrics side by side."""
TREND_JSON = "trend.json"
"""trend.md as data."""
TREND_PNG_OF = "trend-{}.png"
"""One dataset's trend plot (`trend-<dataset>.png`)."""
TRACKED_DIR = ".tracked"
"""Earlier months read back from the tracker (benchmark.baseline_from=tracking): one month folder
each, as the tracker holds it; hidden, so the trend and the folder gate never mistake it for a
month run here."""


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
