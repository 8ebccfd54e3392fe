"""`python -m run experiment=monthly`: one month's benchmark, gated against an earlier month.

1. Resolve the month (`benchmark.month`, default this month) once; everything of this run goes
   under `<root>/<month>/`, and a lock on that folder keeps a second run of the same month out.
2. Record the plan (datasets x retrievers, and the command-line overrides applied to every job)
   in `benchmark.json`. A rerun of an unfinished month must carry the same plan, so a month is
   never a mix of two configurations; finished jobs are kept and only the rest are run.
3. Run the missing jobs as a Hydra multirun (`python -m run -m ...`, through the configured
   `hydra/launcher`), each into `<month>/<dataset>/<retriever>/`.
4. Compare each dataset's jobs per type (comparison.md next to them); mark the month finished.
5. Gate against the baseline month (`benchmark.gate`), write gate.md/gate.json; redraw the trend
   over every finished month. Exit 1 when the gate fails, naming metric, type and drop.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser

from retrieval_bench.benchmark.gate import IMPROVED, OK, GateResult, run_gate
from retrieval_bench.benchmark.history import (
    FINISHED,
    RUNNING,
    BenchmarkError,
    JobKey,
    fingerprint,
    month_jobs,
    month_lock,
    planned_done,
    read_state,
    resolve_baseline,
    write_state,
)
from retrieval_bench.compare.build import compare_dirs, significance_settings
from retrieval_bench.compare.jobs import FinishedJob
from retrieval_bench.config import RunConfig
from retrieval_bench.errors import ConfigError, interrupt_leaves
from retrieval_bench.io import atomic_write_json, atomic_write_text
from retrieval_bench.reports.tables import markdown_table
from retrieval_bench.reports.trend import write_trend

# Command-line keys the driver owns; every other override is applied to each job.
_DRIVER_ROOTS = ("experiment", "benchmark", "compare", "hydra")
_PLAN_GROUPS = ("dataset", "retriever")
# Where each job goes inside the month: <dataset name>/<retriever option>.
_SUBDIR = "${dataset.name}/${hydra:runtime.choices.retriever}"
# Overrides that change where things are kept, not what is measured.
_NOT_PLAN = ("cache_dir",)


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


def _quote(value: str) -> str:
    """A Hydra override value that reads back as `value` (paths may hold any character)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _launch(
    month_dir: Path,
    datasets: Sequence[str],
    retrievers: Sequence[str],
    cfg: RunConfig,
    overrides: Sequence[str],
) -> None:
    cmd = [
        sys.executable,
        "-m",
        "run",
        "-m",
        f"dataset={','.join(datasets)}",
        f"retriever={','.join(retrievers)}",
        *overrides,
        f"hydra.sweep.dir={_quote(str(month_dir.resolve()))}",
        f"hydra.sweep.subdir={_SUBDIR}",
        f"hydra/launcher={cfg.benchmark.launcher}",
        "compare.enabled=false",
    ]
    print(f"benchmark {month_dir.name}: running {list(datasets)} x {list(retrievers)}", flush=True)
    proc = subprocess.run(cmd, check=False)
    if proc.returncode != 0:
        raise BenchmarkError(
            f"jobs for {list(datasets)} x {list(retrievers)} failed (exit {proc.returncode}); "
            "finished jobs are kept: rerun the same command to resume"
        )


def run_benchmark(cfg: RunConfig, task_overrides: Sequence[str], log_dir: str | None = None) -> int:
    """Run, compare, gate and trend one month; 0 = gate passed, 1 = regression."""
    bench = cfg.benchmark
    month = bench.month or current_month()
    root = Path(bench.root)
    month_dir = root / month
    overrides = job_overrides(task_overrides)
    plan = {
        "datasets": list(bench.datasets),
        "retrievers": list(bench.retrievers),
        "overrides": [o for o in overrides if o.split("=")[0].lstrip("+") not in _NOT_PLAN],
    }
    with month_lock(month_dir):
        state = _start(month_dir, month, plan, log_dir)
        finished = month_jobs(month_dir)
        done = planned_done(finished.values())
        todo: dict[tuple[str, ...], list[str]] = {}
        for dataset in bench.datasets:
            missing = tuple(r for r in bench.retrievers if (dataset, r) not in done)
            if missing:
                todo.setdefault(missing, []).append(dataset)
        if not todo:
            print(f"benchmark {month}: every job already finished; nothing to run", flush=True)
        for retrievers, datasets in todo.items():
            _launch(month_dir, datasets, retrievers, cfg, overrides)
        if todo:
            finished = month_jobs(month_dir)
            done = planned_done(finished.values())
        absent = [
            f"{d}/{r}" for d in bench.datasets for r in bench.retrievers if (d, r) not in done
        ]
        if absent:
            raise BenchmarkError(f"{month_dir}: jobs did not finish: {', '.join(absent)}")
        current = _planned_jobs(finished, plan)
        for folder in sorted({job.path.parent for job in current.values()}):
            result = compare_dirs([folder], cfg.compare, out_dir=folder, baseline={})
            print(result.text, flush=True)
        state["status"] = FINISHED
        state["runs"][-1]["finished"] = _now()
        write_state(month_dir, state)

    gate_ok = True
    if bench.gate.enabled:
        base_dir = resolve_baseline(root, month, bench.baseline)
        baseline = {} if base_dir is None else month_jobs(base_dir)
        gate = run_gate(
            current,
            baseline,
            bench.gate,
            significance_settings(cfg.compare),
            stage=cfg.compare.stage,
            min_queries=cfg.compare.min_queries,
            baseline_name=None if base_dir is None else str(base_dir),
        )
        _write_gate(month_dir, month, gate, cfg.compare.confidence)
        gate_ok = gate.passed
        _print_gate(month, gate, cfg.compare.confidence)
    files = write_trend(root, bench.trend_metrics or list(bench.gate.tolerances), cfg.compare.stage)
    print("trend: " + ", ".join(str(f) for f in files), flush=True)
    return 0 if gate_ok else 1


def _start(
    month_dir: Path, month: str, plan: dict[str, Any], log_dir: str | None
) -> dict[str, Any]:
    """Create or resume the month's state; refuse a resume under another plan."""
    fp = fingerprint(plan)
    state = read_state(month_dir)
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
    from retrieval_bench.experiment import git_revision

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


def _gate_rows(gate: GateResult, only_flagged: bool) -> list[list[Any]]:
    rows = []
    for c in gate.checks:
        if only_flagged and c.status in (OK, IMPROVED):
            continue
        rows.append(
            [
                c.dataset,
                c.retriever,
                c.query_type,
                c.metric_after,
                c.n,
                c.before,
                c.after,
                f"{c.change:+.3f}",
                f"[{c.ci_low:+.3f}, {c.ci_high:+.3f}]",
                f"{c.p_holm:.4g}",
                c.tolerance,
                c.status,
            ]
        )
    return rows


_GATE_HEADER = [
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
]


def _write_gate(month_dir: Path, month: str, gate: GateResult, confidence: float) -> None:
    atomic_write_json(month_dir / "gate.json", {"month": month, **gate.to_json()})
    verdict = "PASSED" if gate.passed else f"FAILED ({len(gate.failures)} regressions)"
    lines = [
        f"# Regression gate {month}: {verdict}",
        "",
        f"Baseline: {gate.baseline or 'none (first benchmark: nothing to gate against)'}.",
        "A check fails when the drop exceeds its tolerance and is significant (paired "
        "randomization test, Holm across every check, alpha "
        f"{gate.settings['alpha']:g}); {confidence:.0%} paired bootstrap CI of the change.",
        "",
        *(f"- {c.message(confidence)}" for c in gate.failures),
        *(f"- not gated: {m}" for m in gate.missing),
        "",
        markdown_table(_GATE_HEADER, _gate_rows(gate, only_flagged=False)),
        "",
    ]
    atomic_write_text(month_dir / "gate.md", "\n".join(lines))


def _print_gate(month: str, gate: GateResult, confidence: float) -> None:
    if gate.baseline is None:
        print(f"gate {month}: no earlier finished benchmark; nothing to gate against", flush=True)
        return
    flagged = _gate_rows(gate, only_flagged=True)
    print(f"\ngate {month} against {gate.baseline}: {len(gate.checks)} checks", flush=True)
    if flagged:
        from retrieval_bench.reports.tables import text_table

        print(text_table(_GATE_HEADER, flagged), flush=True)
    for m in gate.missing:
        print(f"not gated: {m}", flush=True)
    if gate.passed:
        print(f"gate {month}: PASSED", flush=True)
        return
    for c in gate.failures:
        print(c.message(confidence), file=sys.stderr, flush=True)
    print(
        f"gate {month}: FAILED, {len(gate.failures)} significant drop(s) beyond tolerance",
        file=sys.stderr,
        flush=True,
    )


def run_from_hydra(cfg: RunConfig) -> int:
    """Entry from the Hydra app: the driver runs once, never as a job of a sweep."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    hydra_cfg = HydraConfig.get()
    if hydra_cfg.mode == RunMode.MULTIRUN:
        raise ConfigError("benchmark.enabled", "run the benchmark without -m/--multirun")
    month_dir = Path(cfg.benchmark.root) / (cfg.benchmark.month or current_month())
    # Ctrl-C: one line saying what is left (finished jobs are kept; a rerun resumes).
    with interrupt_leaves(f"benchmark {month_dir} is unfinished: rerun the same command to resume"):
        return run_benchmark(cfg, list(hydra_cfg.overrides.task), hydra_cfg.runtime.output_dir)
