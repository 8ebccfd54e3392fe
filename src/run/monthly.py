"""`python -m run experiment=monthly`: the monthly benchmark's driver, the app's part of it.

The library (`retrieval_bench.benchmark.month`) plans a month and checks it before any work,
keeps its state, compares and gates it, and returns what it found; this module launches each
dataset's sweep of missing jobs (`python -m run -m ...`, in a process group of its own:
`run.sweep_process`) and prints what the library returns. The steps, in order: plan, lock and
resume the month, run the missing jobs, score dropped answers, judge (`benchmark.judge`),
compare each dataset's jobs, mark the month finished, gate it, redraw the trend. Exit 1 when the
gate fails.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from retrieval_bench.benchmark.gate import GateResult
from retrieval_bench.benchmark.judge_step import judge_month
from retrieval_bench.benchmark.month import (
    GATE_HEADER,
    MonthPlan,
    baseline_line,
    compare_month,
    current_month,
    gate_month,
    gate_rows,
    jobs_to_run,
    mark_finished,
    open_month,
    plan_month,
    planned_finished,
    quote_override,
    record_sweep,
    score_answers,
    sweep_failed,
    sweep_overrides,
    trend,
)
from retrieval_bench.config import RunConfig
from retrieval_bench.errors import ConfigError, interrupt_leaves
from run.sweep_process import run_sweep


def run_benchmark(cfg: RunConfig, task_overrides: Sequence[str], log_dir: str | None = None) -> int:
    """Run, compare, gate and trend one month; 0 = gate passed (or not gated), 1 = gate
    failed."""
    bench = cfg.benchmark
    plan = plan_month(cfg, task_overrides, caller_search_path())
    with open_month(plan, log_dir) as state:
        todo = jobs_to_run(plan.month_dir, bench.datasets, bench.retrievers)
        if not todo:
            print(f"benchmark {plan.month}: every job already finished; nothing to run", flush=True)
        for dataset, retrievers in todo.items():
            _launch(plan, cfg, dataset, retrievers, state)
        finished, scored = score_answers(plan)
        for line in scored:
            print(line, flush=True)
        current = planned_finished(plan, finished)
        snapshots: dict[Path, Path] = {}
        if bench.judge.enabled:
            current, snapshots, judged = judge_month(cfg, current)
            for line in judged:
                print(line, flush=True)
        for comparison in compare_month(cfg, current, snapshots):
            print(comparison.text, flush=True)
        mark_finished(plan, state)

    gate = gate_month(cfg, plan.root, plan.month, current, list(plan.folders.values()))
    print_gate(plan.month, gate)
    files = trend(cfg)
    print("trend: " + ", ".join(str(f) for f in files), flush=True)
    if cfg.tracking.enabled:  # the month's jobs, comparison, gate and trend, as month runs
        from run.tracking import log_finished

        warning = log_finished(plan.month_dir, cfg.tracking)
        print(warning or f"tracking: month {plan.month} logged to {cfg.tracking.uri}", flush=True)
    return 0 if gate is None or gate.passed else 1


def _launch(
    plan: MonthPlan,
    cfg: RunConfig,
    dataset: str,
    retrievers: Sequence[str],
    state: dict[str, Any],
) -> None:
    """One dataset's missing jobs as a sweep (`run_sweep`: a process group of its own that dies
    with the driver), recorded in the month's state so that a rerun can tell whether it is
    still running."""
    cmd = [
        sys.executable,
        "-m",
        "run",
        "-m",
        *sweep_overrides(plan, cfg, dataset, retrievers),
    ]
    print(
        f"benchmark {plan.month_dir.name}: running {dataset} ({plan.folders[dataset]}) x "
        f"{list(retrievers)}",
        flush=True,
    )
    code = run_sweep(cmd, lambda proc: record_sweep(plan, state, proc))
    if code != 0:
        raise sweep_failed(plan, dataset, retrievers, code)


# Where a config source came from (Hydra's `runtime.config_sources`): the command line's
# `--config-dir` and `hydra.searchpath=[...]`. The app's own conf/, Hydra's and its plug-ins'
# sources, and a primary config's own searchpath, the sweep finds by itself.
_CALLER_SOURCES = ("command-line", "hydra.searchpath in command-line")


def caller_search_path() -> list[str]:
    """The driver's own config search path beyond what every `python -m run` has (a
    `--config-dir`, a `hydra.searchpath` on its command line), as the one override that gives
    the month's jobs the same path, when the driver composes and validates them and in the
    sweep that runs them: a retriever or dataset found there is found by both. [] when there
    is none."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return []
    sources = HydraConfig.get().runtime.config_sources
    entries = [f"{s.schema}://{s.path}" for s in sources if s.provider in _CALLER_SOURCES]
    if not entries:
        return []
    return [f"hydra.searchpath=[{','.join(quote_override(e) for e in entries)}]"]


def print_gate(month: str, gate: GateResult | None) -> None:
    """The gate's verdict on the console: the checks that did not pass as a table, the
    failures on stderr."""
    if gate is None:
        print(f"gate {month}: not gated (benchmark.gate.enabled=false)", flush=True)
        return
    if gate.baseline is None and gate.passed:
        print(f"gate {month}: {baseline_line(gate)}", flush=True)
        return
    if gate.baseline is not None:
        print(
            f"\ngate {month} against {baseline_line(gate)}: {len(gate.tested)} checks",
            flush=True,
        )
    for line in gate.relabelled:
        print(line, flush=True)
    for d in gate.plan:
        state = "allowed" if d.allowed else "NOT allowed"
        print(f"plan difference ({state}): {d.describe()}", flush=True)
    flagged = gate_rows(gate, only_flagged=True)
    if flagged:
        from retrieval_bench.reports.tables import text_table

        print(text_table(GATE_HEADER, flagged), flush=True)
    for m in gate.missing:
        print(f"not gated: {m}", flush=True)
    if gate.passed:
        print(f"gate {month}: PASSED", flush=True)
        return
    for c in gate.failures:
        print(c.message(), file=sys.stderr, flush=True)
    for reason in gate.reasons:
        print(f"GATE FAILED: {reason}", file=sys.stderr, flush=True)
    print(f"gate {month}: FAILED", file=sys.stderr, flush=True)


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
