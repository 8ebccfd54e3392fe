"""One month's benchmark as the library plans, keeps the books of, compares and gates it; the
app (`run.monthly`, `python -m run experiment=monthly`) launches the sweeps and prints.

1. Resolve the month (`benchmark.month`, default this month) once; everything of this run goes
   under `<root>/<month>/`, and a lock on that folder keeps a second run of the same month out.
   Every job's config is composed and validated first, and each dataset's folder is its name
   (a BEIR dataset without `dataset.name`: its folder's name); a folder that would resolve
   outside the month is refused, naming the key, before any work.
2. Record the plan (datasets x retrievers, and the command-line overrides applied to every job)
   in `benchmark.json`. A rerun of an unfinished month must carry the same plan, so a month is
   never a mix of two configurations; finished jobs are kept and only the rest are run.
3. The missing jobs run as a Hydra multirun per dataset, through the `hydra/launcher` named by
   `benchmark.launcher`, with `benchmark.launcher_settings` as its `hydra.launcher.*` settings,
   each into `<month>/<dataset name>/<retriever>/` (`sweep_overrides`; the app starts the
   sweep with them in a process group of its own that stops with the driver:
   `run.sweep_process`). A rerun that finds an earlier run's sweep still alive refuses, naming
   its pids (`sweep.live_sweeps`).
4. With `benchmark.judge`, pool each dataset's jobs, grade the new pool entries with the model
   judge and re-score the jobs against people's plus the judge's labels (`judge_step`).
   Compare each dataset's jobs per type (comparison.md next to them, with the three estimates
   when the judge ran); mark the month finished.
5. Gate against the baseline (the latest earlier month whose gate passed, or a pinned one; a
   baseline job scored against other labels than this month's is re-scored against the
   current labels first, see retrieval_bench.labels.rescore),
   write gate.md/gate.json (with the month's gate status, which decides whether it can be a
   later month's baseline); redraw the trend over every finished month. The gate fails on a
   regression, a plan difference not allowed, or no check at all (the app exits 1).

Each step returns what it found (the answers scored, the judge's lines, each comparison, the
gate's result) rather than printing it: what the console shows is the app's.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from retrieval_bench.answers import score_found_answers
from retrieval_bench.benchmark.gate import (
    IMPROVED,
    OK,
    PLAN_PSEUDO_KEYS,
    GateResult,
    flat_config,
    is_allowed,
    run_gate,
)
from retrieval_bench.benchmark.history import (
    FINISHED,
    NOT_GATED,
    RUNNING,
    BenchmarkError,
    JobKey,
    fingerprint,
    folder_name_problem,
    inside,
    job_folder_state,
    month_jobs,
    month_lock,
    planned_done,
    resolve_baseline,
    write_state,
)
from retrieval_bench.benchmark.judge_step import month_judge
from retrieval_bench.benchmark.sweep import live_sweeps, sweep_record
from retrieval_bench.benchmark.trend import write_trend
from retrieval_bench.compare.build import ComparisonOutput, compare_dirs
from retrieval_bench.config import RunConfig
from retrieval_bench.config.renamed import rename_key
from retrieval_bench.config.robustness import RobustnessConfig
from retrieval_bench.errors import ConfigError
from retrieval_bench.io.atomic import atomic_write_json, atomic_write_text
from retrieval_bench.io.folders import check_output_dir
from retrieval_bench.job.check import check_config
from retrieval_bench.jobdir import names
from retrieval_bench.jobdir.files import read_month_state
from retrieval_bench.jobdir.read import FinishedJob
from retrieval_bench.labels.rescore import relabel_baseline
from retrieval_bench.reports.tables import markdown_table
from retrieval_bench.stats.settings import significance_settings

# Command-line keys the driver owns; every other override is applied to each job.
_DRIVER_ROOTS = ("experiment", "benchmark", "compare", "hydra")
_PLAN_GROUPS = ("dataset", "retriever")
# Where each job goes inside its dataset's folder: <retriever option>.
_SUBDIR = "${hydra:runtime.choices.retriever}"
# Overrides that change where things are kept, not what is measured (a key, or a config group
# and every key under it).
_NOT_PLAN = ("cache_dir", "tracking")


def _not_plan(override: str) -> bool:
    key = override.split("=")[0].lstrip("+~")
    return any(key == k or key.startswith(f"{k}.") for k in _NOT_PLAN)


def _now() -> str:
    return dt.datetime.now().isoformat(timespec="seconds")


def current_month() -> str:
    return dt.date.today().strftime("%Y-%m")


def job_overrides(task_overrides: Sequence[str]) -> list[str]:
    """The driver's command-line overrides that apply to every job (e.g. `top_k=8`)."""
    parser = OverridesParser.create()
    out = []
    for text in task_overrides:
        override = parser.parse_override(text)
        key = override.key_or_group.lstrip("+~")
        root = key.split(".")[0].split("/")[0]
        if root in _DRIVER_ROOTS or key in _PLAN_GROUPS:
            continue
        if override.is_sweep_override():
            raise ConfigError(key, f"'{text}' is a sweep; a benchmark job takes one value per key")
        out.append(text)
    return out


def robustness_overrides(node: RobustnessConfig, given: Sequence[str]) -> list[str]:
    """The month's `robustness:` settings (an experiment file's, e.g. monthly_robustness) as
    overrides of every job, so each job runs those variants and the plan records them; keys the
    command line already gives are left to it."""
    defaults = RobustnessConfig()
    named = {o.partition("=")[0].lstrip("+") for o in given}
    out = []
    for item in fields(node):
        value, key = getattr(node, item.name), f"robustness.{item.name}"
        if value == getattr(defaults, item.name) or key in named:
            continue
        if isinstance(value, list):
            out.append(f"{key}=[{','.join(quote_override(str(v)) for v in value)}]")
        else:
            out.append(f"{key}={quote_override(value) if isinstance(value, str) else value}")
    return out


def quote_override(value: str) -> str:
    """A Hydra override value that reads back as `value` (paths may hold any character)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def compose_jobs(
    datasets: Sequence[str],
    retrievers: Sequence[str],
    overrides: Sequence[str],
    search_path: Sequence[str] = (),
) -> dict[tuple[str, str], RunConfig]:
    """Each planned job's config, composed and validated as the job will compose it, so a bad
    value fails here (exit 2) and not after other jobs ran. `search_path`: the caller's own
    config search path as overrides (`hydra.searchpath=[...]`), which the jobs get too. Needs
    Hydra initialised (the app, or `hydra.initialize_config_dir` in a test)."""
    from hydra import compose

    jobs: dict[tuple[str, str], RunConfig] = {}
    for dataset in datasets:
        for retriever in retrievers:
            try:
                composed = compose(
                    config_name="config",
                    overrides=[
                        f"dataset={dataset}",
                        f"retriever={retriever}",
                        *overrides,
                        *search_path,
                    ],
                )
                job: RunConfig = OmegaConf.to_object(composed)  # type: ignore[assignment]
            except (HydraException, OmegaConfBaseException) as exc:
                raise ConfigError(
                    _culprit(str(exc), dataset, retriever, overrides),
                    f"job dataset={dataset} retriever={retriever}: {exc}",
                ) from None
            check_config(job)
            jobs[(dataset, retriever)] = job
    return jobs


def _culprit(message: str, dataset: str, retriever: str, overrides: Sequence[str]) -> str:
    """The config key a job's composition error is about, as far as its message tells."""
    if f"dataset/{dataset}" in message:
        return "benchmark.datasets"
    if f"retriever/{retriever}" in message:
        return "benchmark.retrievers"
    keys = [o.partition("=")[0].lstrip("+~") for o in overrides]
    return next((k for k in keys if k in message), "benchmark")


def dataset_folder(job: RunConfig) -> tuple[str, str]:
    """A job's dataset folder name, as the job will name its dataset, and the config key that
    sets it: `dataset.name`, else (BEIR) the name of the `dataset.path` folder."""
    if job.dataset.name or job.dataset.format != "beir":
        return job.dataset.name, "dataset.name"
    from retrieval_bench.paths import resolve_path

    return resolve_path(job.dataset.path).name, "dataset.path"


def job_folders(month_dir: Path, jobs: Mapping[tuple[str, str], RunConfig]) -> dict[str, str]:
    """Dataset option -> its folder in the month; every job folder checked to lie inside the
    month, one folder per dataset (ConfigError naming the key otherwise)."""
    folders: dict[str, str] = {}
    owner: dict[str, str] = {}
    for (dataset, retriever), job in jobs.items():
        folder, key = dataset_folder(job)
        problem = folder_name_problem(folder)
        if problem:
            raise ConfigError(
                key,
                f"dataset={dataset}: its name, the job folder under {month_dir}, {problem}; "
                "set dataset.name=NAME",
            )
        if owner.setdefault(folder, dataset) != dataset:
            raise ConfigError(
                key,
                f"datasets {owner[folder]} and {dataset} would share the folder "
                f"{month_dir / folder}: each dataset of a month needs its own name",
            )
        inside(month_dir, month_dir / folder / retriever, key)
        folders[dataset] = folder
    return folders


def check_allowed_changes(allowed: Sequence[str], jobs: Mapping[Any, RunConfig]) -> None:
    """Each `benchmark.gate.allow_plan_changes` entry names a config key (or a prefix of one) or
    a plan pseudo-key: a misspelt entry would silently allow nothing."""
    known = set(PLAN_PSEUDO_KEYS)
    for job in jobs.values():
        known.update(flat_config(OmegaConf.to_container(OmegaConf.structured(job))))  # type: ignore[arg-type]
    for entry in allowed:
        current = rename_key(entry) or entry  # an old spelling names its key's new home
        if not is_allowed(current, PLAN_PSEUDO_KEYS) and not any(
            is_allowed(key, [current]) for key in known
        ):
            raise ConfigError(
                "benchmark.gate.allow_plan_changes",
                f"{entry!r} is no config key (nor a prefix of one), nor one of "
                f"{', '.join(PLAN_PSEUDO_KEYS)}",
            )


def launcher_overrides(settings: Mapping[str, Any]) -> list[str]:
    """`benchmark.launcher_settings` as the jobs' `hydra.launcher.<key>=<value>` overrides."""
    out = []
    for key, value in settings.items():
        if value is None:
            text = "null"
        elif isinstance(value, (bool, int, float)):
            text = str(value).lower() if isinstance(value, bool) else str(value)
        else:
            text = quote_override(str(value))
        out.append(f"hydra.launcher.{key}={text}")
    return out


def _job_line(dataset: str, retriever: str, state: str | None) -> str:
    """`<dataset>/<retriever>`, with why its folder is not finished when it says."""
    return f"{dataset}/{retriever}" + (f" ({state})" if state else "")


def jobs_to_run(
    month_dir: Path, datasets: Sequence[str], retrievers: Sequence[str]
) -> dict[str, list[str]]:
    """Dataset option -> the retrievers whose job of the month has not finished (a finished
    job, its `report.md` written, is kept and never run again); datasets with none left out."""
    done = planned_done(month_jobs(month_dir).values())
    todo = {dataset: [r for r in retrievers if (dataset, r) not in done] for dataset in datasets}
    return {dataset: missing for dataset, missing in todo.items() if missing}


def refuse_live_sweeps(month_dir: Path, state: Mapping[str, Any] | None) -> None:
    """BenchmarkError naming the pids when a sweep an earlier run of the month started is still
    running (its driver died before it could stop it): a second one would run the same jobs
    into the same folders at the same time."""
    runs = (state or {}).get("runs") or []
    records = [sweep for run in runs for sweep in run.get("sweeps") or []]
    alive = live_sweeps(records)
    if alive:
        pids = " ".join(map(str, alive))
        raise BenchmarkError(
            f"{month_dir}: the jobs an earlier run of this month started are still running "
            f"(pids {pids}) though that run is gone; wait for them to end, or stop them "
            f"(kill {pids}), then rerun"
        )


@dataclass(frozen=True)
class MonthPlan:
    """One month's run as planned and checked before any work (`plan_month`): where it goes,
    the overrides every job gets, each dataset's folder, and the plan `benchmark.json` records
    (a rerun of the month must carry the same)."""

    month: str
    root: Path
    month_dir: Path
    overrides: list[str]
    folders: dict[str, str]
    plan: dict[str, Any]
    # The caller's config search path (`--config-dir`, `hydra.searchpath`) as overrides: the
    # jobs are composed against it here and the sweeps get it; where configs are found is not
    # what is measured, so the plan does not record it.
    search_path: list[str] = field(default_factory=list)


def plan_month(
    cfg: RunConfig, task_overrides: Sequence[str], search_path: Sequence[str] = ()
) -> MonthPlan:
    """The month of `cfg.benchmark`, every job composed and validated (against `search_path`,
    the caller's own config search path as overrides), its folders checked to lie inside the
    month, the allowed plan changes and the judge's settings checked: a bad value fails here
    (ConfigError, exit 2) before any job runs. Needs Hydra initialised."""
    bench = cfg.benchmark
    month = bench.month or current_month()
    root = Path(bench.root)
    check_output_dir(root, "benchmark.root")
    month_dir = inside(root, root / month, "benchmark.month")
    overrides = job_overrides(task_overrides)
    overrides += robustness_overrides(cfg.robustness, overrides)
    jobs = compose_jobs(bench.datasets, bench.retrievers, overrides, search_path)
    folders = job_folders(month_dir, jobs)
    check_allowed_changes(bench.gate.allow_plan_changes, jobs)
    if bench.judge.enabled:
        month_judge(bench.judge)  # a bad judge setting fails before any job runs
    plan = {
        "datasets": list(bench.datasets),
        "retrievers": list(bench.retrievers),
        "overrides": [o for o in overrides if not _not_plan(o)],
    }
    return MonthPlan(month, root, month_dir, overrides, folders, plan, list(search_path))


@contextlib.contextmanager
def open_month(plan: MonthPlan, log_dir: str | None) -> Iterator[dict[str, Any]]:
    """The month's lock held (a second run of the month is refused), no earlier run's sweep
    alive, and its state (`benchmark.json`) started or resumed under the same plan: yields the
    state, which `record_sweep` and `mark_finished` update."""
    with month_lock(plan.month_dir):
        refuse_live_sweeps(plan.month_dir, read_month_state(plan.month_dir))
        yield _start(plan.month_dir, plan.month, plan.plan, log_dir)


def sweep_overrides(
    plan: MonthPlan, cfg: RunConfig, dataset: str, retrievers: Sequence[str]
) -> list[str]:
    """The overrides of one dataset's sweep of its missing jobs (the app starts the sweep with
    them): every retriever into `<month>/<dataset folder>/<retriever>/`, through
    `benchmark.launcher`, without a comparison of its own (the month compares)."""
    folder = plan.folders[dataset]
    return [
        f"dataset={dataset}",
        f"retriever={','.join(retrievers)}",
        *plan.overrides,
        f"hydra.sweep.dir={quote_override(str((plan.month_dir / folder).resolve()))}",
        f"hydra.sweep.subdir={_SUBDIR}",
        f"hydra/launcher={cfg.benchmark.launcher}",
        *launcher_overrides(cfg.benchmark.launcher_settings),
        "compare.enabled=false",
        *plan.search_path,
    ]


def record_sweep(plan: MonthPlan, state: dict[str, Any], proc: subprocess.Popen[Any]) -> None:
    """A started sweep's process group in the month's state, so that a rerun can tell whether
    it is still running."""
    state["runs"][-1].setdefault("sweeps", []).append(sweep_record(proc))
    write_state(plan.month_dir, state)


def sweep_failed(
    plan: MonthPlan, dataset: str, retrievers: Sequence[str], code: int
) -> BenchmarkError:
    """The error of a dataset's sweep that exited `code`, naming each job that did not finish
    and why its folder says so."""
    folder = plan.month_dir / plan.folders[dataset]
    states = {r: job_folder_state(folder / r) for r in retrievers}
    why = "".join(f"; {_job_line(dataset, r, s)}" for r, s in states.items() if s)
    return BenchmarkError(
        f"jobs for {dataset} x {list(retrievers)} failed (exit {code}){why}; "
        "finished jobs are kept: rerun the same command to resume"
    )


def score_answers(plan: MonthPlan) -> tuple[dict[JobKey, FinishedJob], list[str]]:
    """Score the answers a generator dropped beside a job of the month (`answers.jsonl`, scored
    before compare and gate): the month's jobs as they are then, and a line per job scored."""
    finished = month_jobs(plan.month_dir)
    scored = score_found_answers([job.path for job in finished.values()])
    if scored:
        finished = month_jobs(plan.month_dir)
    return finished, scored


def planned_finished(
    plan: MonthPlan, finished: Mapping[JobKey, FinishedJob]
) -> dict[JobKey, FinishedJob]:
    """The month's planned jobs, once every one of them finished; a BenchmarkError naming
    those that did not (and why their folders say so)."""
    done = planned_done(finished.values())
    absent = [
        _job_line(d, r, job_folder_state(plan.month_dir / plan.folders[d] / r))
        for d in plan.plan["datasets"]
        for r in plan.plan["retrievers"]
        if (d, r) not in done
    ]
    if absent:
        raise BenchmarkError(f"{plan.month_dir}: jobs did not finish: {', '.join(absent)}")
    return _planned_jobs(finished, plan.plan)


def compare_month(
    cfg: RunConfig, current: Mapping[JobKey, FinishedJob], snapshots: Mapping[Path, Path]
) -> Iterator[ComparisonOutput]:
    """Each dataset folder's comparison of the month's jobs (comparison.md next to them, with
    the three estimates where the judge's label snapshot is given), one at a time."""
    for folder in sorted({job.path.parent for job in current.values()}):
        yield compare_dirs(
            [folder],
            cfg.compare,
            out_dir=folder,
            baselines=[],
            judged_labels=snapshots.get(folder),
        )


def mark_finished(plan: MonthPlan, state: dict[str, Any]) -> None:
    """The month's state says every job finished and was compared."""
    state["status"] = FINISHED
    state["runs"][-1]["finished"] = _now()
    write_state(plan.month_dir, state)


def trend(cfg: RunConfig) -> list[Path]:
    """The trend over every finished month of `benchmark.root`, redrawn; the files written."""
    bench = cfg.benchmark
    metrics = bench.trend_metrics or list(bench.gate.tolerances)
    return write_trend(Path(bench.root), metrics, cfg.compare.stage)


def gate_month(
    cfg: RunConfig,
    root: Path,
    month: str,
    current: Mapping[JobKey, FinishedJob],
    experiments: Sequence[str] = (),
) -> GateResult | None:
    """Gate a finished month's jobs against its baseline; write gate.json/gate.md (its status
    decides whether this month can be a later month's baseline) and return the result; None
    when the gate is off (`benchmark.gate.enabled=false`: written as not gated). With
    `benchmark.baseline_from=tracking` the earlier months are the tracker's (`experiments`: the
    month's dataset folders, each its experiment unless tracking.experiment names one)."""
    bench = cfg.benchmark
    month_dir = root / month
    if not bench.gate.enabled:
        atomic_write_json(
            month_dir / names.GATE_JSON,
            {"month": month, "status": NOT_GATED, "reason": "benchmark.gate.enabled=false"},
        )
        atomic_write_text(
            month_dir / names.GATE_MD,
            f"# Regression gate {month}: not gated\n\nbenchmark.gate.enabled=false: this month "
            "is no later month's baseline unless pinned (benchmark.baseline).\n",
        )
        return None
    months_root = root
    if bench.baseline_from == "tracking":
        months_root = _tracked_months(cfg, root, month, experiments)
    choice = resolve_baseline(months_root, month, bench.baseline)
    if choice.path is not None and bench.baseline_from == "tracking":
        from retrieval_bench.tracking.restore import restore_jobs

        restored = restore_jobs(cfg.tracking, _experiments(cfg, experiments), choice.path)
        print(f"baseline {choice.path.name}: {len(restored)} jobs read back from the tracker")
    baseline: dict[JobKey, FinishedJob] | None = None
    relabelled: list[str] = []
    if choice.path is not None:
        # Like with like: a baseline scored against other labels is re-scored first.
        baseline, relabelled = relabel_baseline(current, month_jobs(choice.path))
    gate = run_gate(
        current,
        baseline,
        bench.gate,
        significance_settings(cfg.compare),
        stage=cfg.compare.stage,
        min_queries=cfg.compare.min_queries,
        baseline_name=str(choice.path),
        baseline_reason=choice.reason,
    )
    if choice.path is None and not choice.first:
        gate.no_baseline_reason = choice.reason
    gate.relabelled = relabelled
    _write_gate(month_dir, month, gate)
    return gate


def _experiments(cfg: RunConfig, experiments: Sequence[str]) -> list[str]:
    return [cfg.tracking.experiment] if cfg.tracking.experiment else list(experiments)


def _tracked_months(cfg: RunConfig, root: Path, month: str, experiments: Sequence[str]) -> Path:
    """The earlier months the tracker holds, as month folders under `<root>/.tracked/`."""
    from retrieval_bench.tracking.restore import restore_months

    tracked = root / names.TRACKED_DIR
    found = restore_months(cfg.tracking, _experiments(cfg, experiments), month, tracked)
    print(
        f"baseline from the tracker {cfg.tracking.uri}: "
        + (f"earlier months {', '.join(found)}" if found else "no earlier month"),
        flush=True,
    )
    return tracked


def _start(
    month_dir: Path, month: str, plan: dict[str, Any], log_dir: str | None
) -> dict[str, Any]:
    """Create or resume the month's state; refuse a resume under another plan."""
    fp = fingerprint(plan)
    state = read_month_state(month_dir)
    if state is None:
        state = {"month": month, "plan": plan, "fingerprint": fp, "status": RUNNING, "runs": []}
    elif state.get("fingerprint") != fp:
        old = state.get("plan") or {}
        diff = "; ".join(
            f"{key}: started with {old.get(key)}, now {plan[key]}"
            for key in plan
            if old.get(key) != plan[key]
        )
        raise BenchmarkError(
            f"{month_dir} was started with another plan ({diff}). A month never mixes two "
            "configurations: rerun with the same settings, pick another benchmark.month, "
            "or remove the folder"
        )
    from retrieval_bench.jobdir.write import git_revision

    state["runs"].append(
        {"started": _now(), "finished": None, "git_revision": git_revision(), "log": log_dir}
    )
    if state.get("status") != FINISHED:
        state["status"] = RUNNING
    write_state(month_dir, state)
    return state


def _planned_jobs(jobs: Mapping[JobKey, FinishedJob], plan: dict[str, Any]) -> dict[JobKey, Any]:
    wanted = {(d, r) for d in plan["datasets"] for r in plan["retrievers"]}
    return {
        key: job
        for key, job in jobs.items()
        if (job.choices.get("dataset"), job.choices.get("retriever")) in wanted
    }


def gate_rows(gate: GateResult, only_flagged: bool) -> list[list[Any]]:
    rows = []
    for c in gate.checks:
        if only_flagged and c.status in (OK, IMPROVED):
            continue
        rows.append(
            [
                c.dataset,
                c.retriever,
                c.query_type,
                c.compared,
                c.n,
                c.before,
                c.after,
                f"{c.change:+.3f}",
                c.ci_text,
                f"{c.p_holm:.4g}",
                c.tolerance,
                c.status,
                "" if c.judged_share is None else f"{100 * c.judged_share:.0f}%",
            ]
        )
    return rows


GATE_HEADER = [
    "dataset",
    "retriever",
    "type",
    "metric",
    "n",
    "before",
    "after",
    "change",
    "CI",
    "Holm p",
    "tolerance",
    "status",
    "judge",
]


def baseline_line(gate: GateResult) -> str:
    if gate.baseline is None and not gate.no_baseline_reason:
        return f"no baseline, nothing gated ({gate.baseline_reason})"
    if gate.baseline is None:
        return f"none usable: {gate.baseline_reason}"
    return f"{gate.baseline} ({gate.baseline_reason})"


def _write_gate(month_dir: Path, month: str, gate: GateResult) -> None:
    atomic_write_json(month_dir / names.GATE_JSON, {"month": month, **gate.to_json()})
    verdict = "PASSED" if gate.passed else "FAILED"
    lines = [
        f"# Regression gate {month}: {verdict}",
        "",
        f"Baseline: {baseline_line(gate)}.",
        "",
        *(f"- {line}" for line in gate.relabelled),
        *([""] if gate.relabelled else []),
        *(f"- GATE FAILED: {reason}" for reason in gate.reasons),
        *(f"- {c.message()}" for c in gate.failures),
    ]
    if gate.plan:
        lines += ["", "Plan differences from the baseline:", ""]
        lines += [
            f"- {d.describe()}: {'allowed' if d.allowed else 'NOT allowed'}" for d in gate.plan
        ]
    if gate.baseline is not None:
        lines += [
            "",
            "A check fails when the drop exceeds its tolerance and is significant (paired "
            "randomization test, Holm across every check, alpha "
            f"{gate.settings['alpha']:g}). CI of the change: that test inverted at the level "
            "of the check's Holm step (the i-th smallest of m p-values: 1 - alpha / (m - i)), "
            "so it excludes 0 exactly where the check is significant; `unbounded`: too few "
            "queries for any shift to be rejected. `judge`: the share of this month's top K, "
            "over the check's queries, labelled by a model judge (empty: no judge label): the "
            "checks that rest on judged labels.",
            "",
            *(f"- not gated: {m}" for m in gate.missing),
            *([""] if gate.missing else []),
            markdown_table(GATE_HEADER, gate_rows(gate, only_flagged=False)),
        ]
    atomic_write_text(month_dir / names.GATE_MD, "\n".join([*lines, ""]))
