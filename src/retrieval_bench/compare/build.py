"""Build the comparison of a set of finished jobs and write it next to them.

Per dataset (jobs on different datasets are never compared with each other), and within one
per scoring unit, label snapshot and K unless K is what the jobs vary (`comparable_groups`):

* verdict table: for each query type (and `all`) and each metric, each configuration's mean
  with its verdict (`stats.verdicts.verdict_cells`, Holm over `compare.family`), and the
  best configuration per type, flagged "all weak" below `weak_below` x the metric's ideal bound;
* ablation: when a baseline is named (`compare.baselines`), or the jobs vary anything besides the
  retriever, each setting's difference from the baseline, per type, with significance;
* bad cases (`compare.drilldown`).

Files: `comparison.json`, `comparison.md`, `badcases.json`, `badcases.md`, `comparison.html`
(`reports.html`) and `results.csv` / `results.parquet` (every job, long format) in the output
folder.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from retrieval_bench.compare.baselines import resolve_baseline
from retrieval_bench.compare.cost import cost_record
from retrieval_bench.compare.coverage import label_coverage
from retrieval_bench.compare.drilldown import drilldown
from retrieval_bench.compare.drilldown import to_markdown as badcases_markdown
from retrieval_bench.compare.robustness import (
    heatmap_name,
    robustness_record,
    write_robustness_heatmap,
)
from retrieval_bench.compare.tiers import tier_record, tier_settings
from retrieval_bench.config.compare import CORRECTIONS, FAMILY_SCOPE, CompareConfig
from retrieval_bench.errors import BenchError, ConfigError
from retrieval_bench.io.atomic import atomic_write_json, atomic_write_text
from retrieval_bench.io.strict_json import strict_json
from retrieval_bench.jobdir import names
from retrieval_bench.jobdir.files import JobFolderError
from retrieval_bench.jobdir.job_sets import assign_labels, group_by_dataset, varying_keys
from retrieval_bench.jobdir.read import FinishedJob, Snapshot, scan_jobs
from retrieval_bench.paths import resolve_path
from retrieval_bench.scoring.registry import (
    ideal_value,
    is_answer_measure,
    is_robustness_measure,
    lower_is_better,
)
from retrieval_bench.scoring.table import (
    SWEEP_COLUMNS,
    label_snapshot,
    scoring_unit,
    sweep_rows,
)
from retrieval_bench.stats.settings import significance_settings
from retrieval_bench.stats.verdicts import (
    ALL,
    delta_families,
    family_key,
    ordered_types,
    verdict_cells,
)


def values_by_type(
    job: FinishedJob, stage: str, spec: str, types: Sequence[str]
) -> dict[str, dict[str, float]]:
    """type -> {query id: value}, for `types` and any other type found; `all` (always there)
    holds every scored query."""
    values = job.per_query(stage, spec)
    qtypes = job.metric_query_types(stage, spec)
    out: dict[str, dict[str, float]] = {t: {} for t in (*types, ALL)}
    for qid, value in values.items():
        t = qtypes.get(qid, "unknown")
        out.setdefault(t, {})[qid] = value
        out[ALL][qid] = value
    return out


def _metric_heading(jobs: Sequence[FinishedJob], spec: str) -> str:
    names = sorted({j.resolve_metric(spec) for j in jobs})
    if len(names) == 1:
        return names[0]
    ks = sorted({j.top_k for j in jobs})
    return f"{spec} (K = each job's top_k: {', '.join(map(str, ks))})"


def _too_deep(jobs: Sequence[FinishedJob], stage: str, spec: str) -> dict[str, int]:
    """label -> list length, for the jobs whose metric cuts deeper than the stage's lists
    (the job's `depth_exceeds_list`): a value there is not measured at its depth."""
    out: dict[str, int] = {}
    if is_answer_measure(spec):  # measured on the context, at no cut-off
        return out
    for job in jobs:
        flag = job.stage(stage).get("depth_exceeds_list") or {}
        k = int(job.resolve_metric(spec).partition("@")[2])
        if k in flag.get("cutoffs", ()):
            out[job.label] = int(flag["list_length"])
    return out


def _types(jobs: Sequence[FinishedJob], stage: str) -> list[str]:
    found: set[str] = set()
    for job in jobs:
        found.update((job.stage(stage).get("by_type") or {}).keys())
        found.update(job.query_types(stage).values())
    return ordered_types(list(found))


def _scored_counts(jobs: Sequence[FinishedJob], stage: str) -> dict[str, dict[str, Any]]:
    """Per type, what the first job's counts say (labels are shared by the jobs of a dataset)."""
    counts = jobs[0].stage(stage).get("counts") or {}
    out = {t: dict(v) for t, v in (counts.get("by_type") or {}).items()}
    out[ALL] = {"scored": counts.get("scored"), "excluded": counts.get("excluded", {})}
    return out


def compare_dataset(
    jobs: list[FinishedJob],
    cfg: CompareConfig,
    baselines: Sequence[Mapping[str, Any]] = (),
    baseline_key: str = "compare.baselines",
) -> dict[str, Any]:
    """The comparison record of one dataset's jobs (labels are assigned here); one ablation per
    baseline (`baseline_key`: where they were given, for a refusal naming it)."""
    keys = assign_labels(jobs)
    stage = cfg.stage
    sig = significance_settings(cfg)
    types = _types(jobs, stage)
    metrics: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}
    cells: dict[str, dict[str, Any]] = {}
    per_type_values: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
    for spec in cfg.metrics:
        missing = [j.label for j in jobs if not j.has_metric(stage, spec)]
        if missing:
            skipped[spec] = f"not in metrics.json of: {', '.join(missing)}"
            continue
        per_type_values[spec] = {j.label: values_by_type(j, stage, spec, types) for j in jobs}
        metrics.append(
            {
                "spec": spec,
                "heading": _metric_heading(jobs, spec),
                "resolved": {j.label: j.resolve_metric(spec) for j in jobs},
                "depth_exceeds_list": _too_deep(jobs, stage, spec),
            }
        )
    if not metrics:
        raise BenchError(f"no metric of {list(cfg.metrics)} is in every job: {skipped}")
    table = {
        (m["spec"], t): {label: v.get(t, {}) for label, v in per_type_values[m["spec"]].items()}
        for m in metrics
        for t in types
    }
    decided = verdict_cells(
        table,
        sig,
        cfg.min_queries,
        family_key(cfg.family),
        cfg.family,
        lambda key: lower_is_better(key[0]),
    )
    for (spec, t), cell in decided.items():
        cells.setdefault(spec, {})[t] = cell.to_json()
    tiers = tier_record(table, cfg, sig)

    counts = _scored_counts(jobs, stage)
    for spec_cells in cells.values():
        for t, cell in spec_cells.items():
            excluded = (counts.get(t) or {}).get("excluded") or {}
            if cell["n"] == 0 and excluded:
                detail = ", ".join(f"{reason} {k}" for reason, k in sorted(excluded.items()))
                cell["note"] = f"no scored query (excluded: {detail})"
    by_label = {j.label: j for j in jobs}
    best: dict[str, dict[str, dict[str, Any]]] = {}
    for t in types:
        best[t] = {}
        for m in metrics:
            cell = cells[m["spec"]][t]
            bound = _ideal_bound(by_label, stage, m["spec"], table[(m["spec"], t)], cell)
            best[t][m["spec"]] = _best_entry(cell, cfg.weak_below, bound)

    record: dict[str, Any] = {
        "dataset": jobs[0].dataset,
        "stage": stage,
        "varying": keys,
        "configurations": [
            {
                "label": j.label,
                "path": str(j.path),
                "setting": j.setting,
                "top_k": j.top_k,
            }
            for j in jobs
        ],
        "counts": counts,
        "metrics": metrics,
        "skipped_metrics": skipped,
        "types": types,
        "cells": cells,
        "tiers": tiers,
        "best": best,
        "coverage": label_coverage(jobs, stage),
        "cost": cost_record(jobs, tiers),
        "ablations": [],
        # Perturbed variants against their originals, every job an arm (compare.robustness).
        "robustness": robustness_record(jobs, cfg),
    }
    if len(jobs) > 1 and (baselines or any(k != "retriever" for k in keys)):
        record["ablations"] = [
            build_ablation(jobs, keys, baseline, metrics, per_type_values, types, cfg, baseline_key)
            for baseline in (baselines or [{}])
        ]
    return record


def _ideal_bound(
    jobs: Mapping[str, FinishedJob],
    stage: str,
    spec: str,
    values: Mapping[str, Mapping[str, float]],
    cell: Mapping[str, Any],
) -> float | None:
    """The mean ideal value (`registry.ideal_value`) of the cell's best configuration's metric
    over the cell's paired queries: what a perfect ranking would score there. None for a
    lower-is-better metric (leak@K), where "weak" as a fraction of the bound means nothing."""
    means = {k: v for k, v in cell["means"].items() if v is not None and v == v}
    no_bound = is_answer_measure(spec) or is_robustness_measure(spec) or lower_is_better(spec)
    if not means or not values or no_bound:
        return None
    job = jobs[max(means, key=lambda label: means[label])]
    qids = set.intersection(*(set(v) for v in values.values()))
    rows = job.stage(stage).get("per_query") or {}
    relevant = [rows[q].get("n_relevant") for q in sorted(qids)]
    if not relevant or any(g is None or g <= 0 for g in relevant):
        return None
    metric, _, k = job.resolve_metric(spec).partition("@")
    return float(np.mean(ideal_value(metric, int(k), np.array(relevant))))


def _best_entry(cell: Mapping[str, Any], weak_below: float, bound: float | None) -> dict[str, Any]:
    """The `best` column's entry; "all weak" when the best mean is below `weak_below` times
    the ideal bound of the cell (1 for hit, mrr, ndcg; recall_bound for recall)."""
    means = {k: v for k, v in cell["means"].items() if v is not None and v == v}
    top = max(means.values()) if means else None
    weak = top is not None and bound is not None and top < weak_below * bound
    if cell["best"]:
        text = cell["best"]
    elif cell["verdicts"]:
        tied = [k for k, v in cell["verdicts"].items() if v == "tie"]
        text = "all tie" if len(tied) == len(cell["verdicts"]) else "tie: " + ", ".join(tied)
    else:
        text = cell["note"] or "undecided"
    if weak:
        text += f" (all weak: best {top:.3f} < {weak_below:g} x bound {bound:.3f})"
    return {"best": cell["best"], "text": text, "all_weak": weak, "n": cell["n"], "bound": bound}


def build_ablation(
    jobs: Sequence[FinishedJob],
    keys: Sequence[str],
    baseline: Mapping[str, Any],
    metrics: Sequence[Mapping[str, Any]],
    per_type_values: Mapping[str, Mapping[str, Mapping[str, Mapping[str, float]]]],
    types: Sequence[str],
    cfg: CompareConfig,
    baseline_key: str = "compare.baselines",
) -> dict[str, Any]:
    """Each setting minus the baseline setting, per type and metric.

    The baseline names some of the varying keys (e.g. `top_k=6`); jobs are grouped by the keys
    it does not name (e.g. per retriever), and in each group every job is compared with the
    group's job that matches the baseline. Without a baseline, the first job's setting is it.
    A baseline the jobs cannot hold is refused naming `baseline_key` (`compare.baselines`).
    Every delta says `against` which job it was taken.
    """
    spec = resolve_baseline(baseline, jobs, keys, baseline_key) or dict(jobs[0].setting)
    named = ",".join(f"{k}={v}" for k, v in spec.items())
    rest = [k for k in keys if k not in spec]
    groups: dict[tuple[str, ...], list[FinishedJob]] = {}
    for job in jobs:
        groups.setdefault(tuple(job.setting[k] for k in rest), []).append(job)
    sig = significance_settings(cfg)
    out_groups = []
    for group_key, members in groups.items():
        title = ",".join(f"{k}={v}" for k, v in zip(rest, group_key, strict=True)) or "all jobs"
        base = [j for j in members if all(j.setting.get(k) == v for k, v in spec.items())]
        others = [j for j in members if j not in base]
        entry: dict[str, Any] = {"group": title, "baseline": None, "settings": [], "deltas": {}}
        if len(base) != 1:
            entry["note"] = (
                "no job matches the baseline" if not base else "several jobs match the baseline"
            )
            out_groups.append(entry)
            continue
        b = base[0]

        def short(job: FinishedJob) -> str:
            return ",".join(f"{k}={job.setting[k]}" for k in spec)

        entry["baseline"] = {"label": b.label, "setting": short(b)}
        entry["settings"] = [{"label": o.label, "setting": short(o)} for o in others]
        group_cells = {
            (m["spec"], t): (
                per_type_values[m["spec"]][b.label].get(t, {}),
                {short(o): per_type_values[m["spec"]][o.label].get(t, {}) for o in others},
            )
            for m in metrics
            for t in types
        }
        family = family_key(cfg.family)
        deltas = delta_families(group_cells, sig, cfg.min_queries, family, cfg.family)
        for (metric_spec, t), cell_deltas in deltas.items():
            entry["deltas"].setdefault(metric_spec, {})[t] = [
                {**d.to_json(), "against": b.label} for d in cell_deltas
            ]
        out_groups.append(entry)
    return {"baseline": spec, "against": named, "keys": list(spec), "groups": out_groups}


def settings_record(cfg: CompareConfig) -> dict[str, Any]:
    """How every comparison of a record was made (`settings` of comparison.json)."""
    return {
        "stage": cfg.stage,
        "metrics": list(cfg.metrics),
        "alpha": cfg.alpha,
        "n_resamples": cfg.n_resamples,
        "confidence": cfg.confidence,
        "seed": cfg.seed,
        "min_queries": cfg.min_queries,
        "family": cfg.family,
        "weak_below": cfg.weak_below,
        "family_scope": FAMILY_SCOPE[cfg.family],
        "correction": cfg.correction,
        "test": (
            f"paired randomization (sign-flip), two-sided; {CORRECTIONS[cfg.correction]} "
            "over the family of " + FAMILY_SCOPE[cfg.family]
        ),
        "interval": INTERVALS[cfg.correction],
        **tier_settings(cfg),
        "power": cfg.power,
        "target_delta": cfg.target_delta,
        "power_method": (
            "the sign-flip test rejects on a monotone function of Student's t, so with every "
            "sign pattern its power is the t-test's (noncentral t); as run, exact tests reject "
            "at the largest level 2c/2**n below a, and randomized ones when at most K of their "
            "n_resamples patterns are as extreme, i.e. the t-test at the level 2Q, "
            "Q ~ Beta(K + 1, n_resamples - K), averaged over Q: MDE = the difference with "
            "power `power` at a on n queries, sd of the per-query differences (ddof 1), "
            "a = alpha / m (m: tests in the family; the level a test must reach alone under "
            "Holm and BH alike); n_needed: the smallest n from which on the power at "
            "target_delta is at least `power`"
        ),
    }


# How each correction's CIs are drawn, as comparison.json says it.
INTERVALS = {
    "holm": (
        "the sign-flip test inverted (every shift it does not reject), at the "
        "confidence level of its Holm step: 1 - (1 - confidence) / (m - i) for the "
        "i-th smallest of the family's m p-values (an accepted test: the step where "
        "Holm stopped)"
    ),
    "bh": (
        "the sign-flip test inverted (every shift it does not reject), at "
        "1 - R (1 - confidence) / m for every test of the family, R the number BH rejects "
        "(at least 1): Benjamini-Yekutieli (2005) FCR-adjusted intervals for the selected "
        "tests, and the same level for the others (where each holds 0)"
    ),
}




# What must be equal for two jobs' values to share a table: (name in a group's title, value).
# The sweep's results table holds the same aspects as columns (scoring.table.SWEEP_COLUMNS).
_SAME = (("unit", scoring_unit), ("labels", label_snapshot))


def comparable_groups(jobs: Sequence[FinishedJob]) -> dict[str, tuple[list[FinishedJob], str]]:
    """The jobs that may share a verdict table, by title, each with a note on why it was split
    off ('' when it was not): one dataset (as ever), one scoring unit (`scoring.unit`: a
    document and a passage are different things to find), one label snapshot (the labels hash:
    other labels score the same ranking differently), and one K unless K is what the jobs vary
    (`top_k` in their overrides: the top_k ablation reads recall@K at each job's own K)."""
    out: dict[str, tuple[list[FinishedJob], str]] = {}
    for name, group in group_by_dataset(jobs).items():
        aspects = list(_SAME)
        if len({j.top_k for j in group}) > 1 and "top_k" not in varying_keys(group):
            aspects.append(("top_k", lambda job: str(job.top_k)))
        parts: dict[tuple[str, ...], list[FinishedJob]] = {}
        for job in group:
            parts.setdefault(tuple(value(job) for _, value in aspects), []).append(job)
        if len(parts) == 1:
            out[name] = (group, "")
            continue
        differ = [
            i for i in range(len(aspects)) if len({key[i] for key in parts}) > 1
        ]
        why = "; ".join(
            f"{aspects[i][0]} {', '.join(sorted({key[i] for key in parts}))}" for i in differ
        )
        note = (
            f"{name}'s jobs differ in what their values measure ({why}): each kind is compared "
            "on its own, never in one table"
        )
        for key, members in parts.items():
            title = f"{name} ({', '.join(f'{aspects[i][0]}={key[i]}' for i in differ)})"
            out[title] = (members, note)
    return out


def plan_estimates(
    group: Sequence[FinishedJob], cfg: CompareConfig, labels: Path | None
) -> dict[str, Any]:
    """`compare.estimate=active`: the estimates under the plan `compare.label_plan`, against
    `labels` (default: the jobs' own evaluation set), whose jobs must be in `group`."""
    from retrieval_bench.active.estimate import estimate_plan
    from retrieval_bench.active.plan import read_plan

    plan_dir = resolve_path(cfg.label_plan)
    plan = read_plan(plan_dir)
    paths = {str(job.path.resolve()) for job in group}
    planned = [j["path"] for j in plan["jobs"] if str(Path(j["path"]).resolve()) not in paths]
    if planned:
        raise ConfigError(
            "compare.label_plan", f"{plan_dir}: its jobs {planned} are not among those compared"
        )
    if labels is None:
        evalsets = {str((job.config.get("dataset") or {}).get("evalset") or "") for job in group}
        if len(evalsets) != 1 or "" in evalsets:
            raise ConfigError(
                "compare.label_plan", "the jobs name no one evaluation set: give --judged-labels"
            )
        labels = resolve_path(evalsets.pop())
    return estimate_plan(plan_dir, labels, cfg.confidence)


@dataclass
class ComparisonOutput:
    record: dict[str, Any]
    text: str
    files: list[Path]


def compare_dirs(
    paths: Sequence[str | Path],
    cfg: CompareConfig,
    out_dir: str | Path | None = None,
    baselines: Sequence[Mapping[str, Any]] | None = None,
    unchanged: Snapshot | None = None,
    baseline_key: str | None = None,
    judged_labels: Path | None = None,
) -> ComparisonOutput:
    """Load the job folders under `paths`, compare them per dataset, write the files to
    `out_dir` (if given), and return the record and the terminal text. `baselines`: the
    ablation baselines (default `cfg.baseline_settings()`; `[]`: none named), `baseline_key`
    where they were given (default `cfg.baseline_key()`), named when one is refused. Where
    the jobs' labels (or `judged_labels`, a snapshot with a model judge's grades) hold a
    judge's labels, each dataset's record also gets the three estimates (`judge.estimates`)."""
    from retrieval_bench.judge.estimates import estimate_judged
    from retrieval_bench.reports.comparison import comparison_markdown, comparison_text

    scan = scan_jobs(paths, unchanged=unchanged)
    jobs = scan.jobs
    if not jobs:
        raise JobFolderError("no finished job to compare; " + "; ".join(scan.skipped_lines()))
    named = list(baselines if baselines is not None else cfg.baseline_settings())
    key = baseline_key or cfg.baseline_key()
    datasets: dict[str, Any] = {}
    badcases: dict[str, Any] = {}
    datasets_run = group_by_dataset(jobs)
    if judged_labels is not None and len(datasets_run) > 1:
        raise BenchError(
            f"--judged-labels {judged_labels} is one dataset's labels, but the jobs ran "
            f"{len(datasets_run)} datasets ({', '.join(sorted(datasets_run))}): compare one at a "
            "time"
        )
    groups = comparable_groups(jobs)
    for name, (group, note) in groups.items():
        datasets[name] = compare_dataset(group, cfg, named, key)
        if note:
            datasets[name]["separated"] = note
        estimates = estimate_judged(group, cfg, significance_settings(cfg), judged_labels)
        if estimates is not None:
            datasets[name]["judge_estimates"] = estimates
        if cfg.estimate == "active":
            datasets[name]["active_estimates"] = plan_estimates(group, cfg, judged_labels)
        specs = [m["spec"] for m in datasets[name]["metrics"]]
        # Bad cases are rankings: led by the first retrieval metric compared.
        primary = next((m for m in specs if not is_answer_measure(m)), "recall@K")
        badcases[name] = drilldown(group, cfg.stage, primary)
    record = strict_json(
        {
            "settings": settings_record(cfg),
            "datasets": datasets,
            "skipped": [{"path": str(path), "reason": reason} for path, reason in scan.skipped],
        }
    )
    files: list[Path] = []
    if out_dir is not None:
        out = Path(out_dir)
        heatmaps = [
            write_robustness_heatmap(out, heatmap_name(name, len(datasets)), ds["robustness"])
            for name, ds in record["datasets"].items()
            if ds.get("robustness")
        ]
        atomic_write_json(out / names.COMPARISON_JSON, record)
        atomic_write_text(out / names.COMPARISON_MD, comparison_markdown(record))
        atomic_write_json(out / names.BADCASES_JSON, badcases)
        atomic_write_text(
            out / names.BADCASES_MD,
            "\n".join(badcases_markdown(b, name) for name, b in badcases.items()),
        )
        from retrieval_bench.compare.html import write_comparison_html
        from retrieval_bench.jobdir.write import write_results_table

        members = {name: group for name, (group, _) in groups.items()}
        html = write_comparison_html(out, datasets, members, record["settings"], scan.skipped)
        tables = write_results_table(out, sweep_rows(jobs), SWEEP_COLUMNS)
        files = [out / n for n in (names.COMPARISON_MD, names.COMPARISON_JSON, names.BADCASES_MD)]
        files += [*html, *tables, *(h for h in heatmaps if h is not None)]
    text = "\n".join([*scan.skipped_lines(), comparison_text(record, files)])
    return ComparisonOutput(record, text, files)
