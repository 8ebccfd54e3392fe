"""The regression gate: does any gated metric drop, per type, beyond tolerance and significantly?

Each check pairs one job of this month with the same dataset/retriever job of the baseline
month, on the queries both scored (by query id) in one query type (or `all`), for one gated
metric at each job's own top_k. Its change is mean(this month) - mean(baseline), with a paired
randomization p-value; p-values are Holm-adjusted across every check of the run, so the gate's
false-alarm rate is alpha for the whole run, not per check (always Holm, whatever
`compare.correction` says: a false alarm fails a month, so the gate bounds the chance of any).
The CI of a change is that same family's (`stats.corrections.family_tests` at
`benchmark.gate.alpha`): the sign-flip test inverted at the level of the check's Holm step, so
it excludes 0 exactly when the check is significant.

A "drop" is a change for the worse in the metric's own direction (`scoring.registry`): a fall
of recall@K, a rise of leak@K. A check *fails* (`regression`) when the drop exceeds its
tolerance and the Holm-adjusted p is below alpha. A drop beyond tolerance that is not
significant is reported (`drop, not significant`, or `drop, too few queries` when no
difference could be significant) but passes: the gate refuses changes on evidence, not on
noise.

When the month's labels hold a model judge's labels (`benchmark.judge`), each check records
the share of its queries' top K labelled by the judge (`judged_share`), and its line says it
rests on judged labels.

The gate as a whole fails (exit 1) on any of: a regression; a plan difference from the baseline
(a config value, the dataset's files, jobs added or dropped) not allowed by
`benchmark.gate.allow_plan_changes`; no check at all (nothing of this month could be compared:
a gate that checked nothing vouches for nothing). Only the first benchmark, with no earlier
month, passes ungated.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from retrieval_bench.benchmark.history import FAILED, NO_BASELINE, PASSED, JobKey
from retrieval_bench.compare.build import values_by_type
from retrieval_bench.config.benchmark import GateConfig
from retrieval_bench.config.renamed import rename_key
from retrieval_bench.io.strict_json import json_number
from retrieval_bench.jobdir.job_sets import flat_config
from retrieval_bench.jobdir.read import FinishedJob, canonical
from retrieval_bench.judge.estimates import judge_shares
from retrieval_bench.scoring.registry import lower_is_better
from retrieval_bench.stats.corrections import family_tests, holm
from retrieval_bench.stats.paired import ci_json
from retrieval_bench.stats.settings import SignificanceSettings
from retrieval_bench.stats.verdicts import ordered_types, paired_values, too_few

REGRESSION = "regression"
DROP = "drop, not significant"
UNDECIDED = "drop, too few queries"
IMPROVED = "improved"
OK = "ok"
NO_DATA = "no paired queries"


@dataclass
class Check:
    dataset: str
    retriever: str
    metric: str
    metric_before: str
    metric_after: str
    query_type: str
    n: int
    unpaired: int
    before: float
    after: float
    change: float
    ci_low: float
    ci_high: float
    p_value: float
    p_holm: float
    tolerance: float
    status: str = OK
    note: str = ""
    # The CI's confidence level: that of the check's Holm step in the gate's family.
    ci_level: float = float("nan")
    # The mean share of this month's top K, over the check's queries, whose label a model
    # judge gave (None: the labels hold no judge label): how far the check rests on it.
    judged_share: float | None = None
    # The query type whose check this one repeats ('' when none): on a set of one query type
    # its row and `all` pair the same queries, one test counted once in the Holm family.
    same_as: str = ""

    @property
    def compared(self) -> str:
        """The metric as each month measured it (`recall@6->recall@8` when top_k changed)."""
        if self.metric_before == self.metric_after:
            return self.metric_after
        return f"{self.metric_before}->{self.metric_after}"

    @property
    def loss(self) -> float:
        """The change for the worse: -change, or +change for a lower-is-better metric."""
        return self.change if lower_is_better(self.metric) else -self.change

    @property
    def ci_text(self) -> str:
        """`[-0.120, -0.040] 99.17%`: the CI at its Holm level; `unbounded` where no shift
        could be rejected."""

        def end(value: float) -> str:
            return "unbounded" if np.isinf(value) else f"{value:+.3f}"

        level = "" if np.isnan(self.ci_level) else f" {100 * self.ci_level:.4g}%"
        return f"[{end(self.ci_low)}, {end(self.ci_high)}]{level}"

    @property
    def judge_text(self) -> str:
        """`rests on judged labels (12% of the top K)`, or '' when no label is the judge's."""
        if not self.judged_share:
            return ""
        return f"rests on judged labels ({100 * self.judged_share:.0f}% of the top K)"

    def message(self) -> str:
        name = self.compared
        judged = f"; {self.judge_text}" if self.judge_text else ""
        return (
            f"{self.status.upper()}: {self.dataset} retriever={self.retriever} "
            f"type={self.query_type} {name}: {self.before:.3f} -> {self.after:.3f} "
            f"(drop {self.loss:.3f} > tolerance {self.tolerance:g}; "
            f"CI of the change {self.ci_text} (Holm level); "
            f"p={self.p_value:.4g}, Holm p={self.p_holm:.4g}; n={self.n} queries{judged})"
        )

    def to_json(self) -> dict[str, Any]:
        """Strict JSON: an infinite CI end is null with `ci_unbounded` (`ci_json`)."""
        out = {k: json_number(v) if isinstance(v, float) else v for k, v in asdict(self).items()}
        return {**out, **ci_json(self.ci_low, self.ci_high)}


# Pseudo-keys of a plan that are not config values.
DATASETS, RETRIEVERS, DATA_FILES = "benchmark.datasets", "benchmark.retrievers", "dataset.files"
PLAN_PSEUDO_KEYS = (DATASETS, RETRIEVERS, DATA_FILES)


@dataclass
class PlanDifference:
    """One way this month's plan differs from its baseline's, and the jobs it concerns."""

    key: str
    before: str
    after: str
    jobs: list[str] = field(default_factory=list)
    allowed: bool = False

    def describe(self) -> str:
        where = f" ({', '.join(self.jobs)})" if self.jobs else ""
        return f"{self.key}: {self.before} -> {self.after}{where}"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def is_allowed(key: str, allowed: Iterable[str]) -> bool:
    """`key` is one of `allowed` or lies under one (`bm25` allows `bm25.k1`)."""
    return any(key == a or key.startswith(a + ".") for a in allowed)


def plan_differences(
    current: Mapping[JobKey, FinishedJob],
    baseline: Mapping[JobKey, FinishedJob],
    allowed: Sequence[str] = (),
) -> list[PlanDifference]:
    """Every difference between what this month and its baseline ran: datasets, retrievers per
    dataset, each common job's resolved config values and dataset files. A key only one of
    the two configs has (an option added or retired by a code change) is not a difference."""
    found: dict[tuple[str, str, str], list[str]] = {}

    def note(key: str, before: str, after: str, where: str = "") -> None:
        jobs = found.setdefault((key, before, after), [])
        if where:
            jobs.append(where)

    def names(values: Iterable[str]) -> str:
        return canonical(sorted(set(values)))

    before_sets = {
        k.dataset: {b.retriever for b in baseline if b.dataset == k.dataset} for k in baseline
    }
    after_sets = {
        k.dataset: {c.retriever for c in current if c.dataset == k.dataset} for k in current
    }
    if set(before_sets) != set(after_sets):
        note(DATASETS, names(before_sets), names(after_sets))
    for dataset in sorted(set(before_sets) & set(after_sets)):
        if before_sets[dataset] != after_sets[dataset]:
            note(RETRIEVERS, names(before_sets[dataset]), names(after_sets[dataset]), dataset)
    for key in sorted(set(current) & set(baseline), key=str):
        now, then = current[key], baseline[key]
        old_cfg, new_cfg = renamed_flat(then.config), renamed_flat(now.config)
        for name in sorted(set(old_cfg) & set(new_cfg)):
            if old_cfg[name] != new_cfg[name]:
                note(name, old_cfg[name], new_cfg[name], str(key))
        old_files = (then.manifest.get("dataset") or {}).get("files_sha256") or {}
        new_files = (now.manifest.get("dataset") or {}).get("files_sha256") or {}
        for name in sorted(set(old_files) | set(new_files)):
            if old_files.get(name) != new_files.get(name):
                short = [
                    str(h)[:12] if h else "(absent)"
                    for h in (old_files.get(name), new_files.get(name))
                ]
                note(f"{DATA_FILES}.{name}", short[0], short[1], str(key))
    allowed = [rename_key(entry) or entry for entry in allowed]
    return [
        PlanDifference(key, before, after, jobs, is_allowed(key, allowed))
        for (key, before, after), jobs in found.items()
    ]


def renamed_flat(config: Mapping[str, Any]) -> dict[str, str]:
    """`flat_config`, each key of an old spelling (a month recorded before a key moved home,
    config.renamed) under its new name, so months on both sides of a rename compare key by
    key."""
    return {rename_key(key) or key: value for key, value in flat_config(config).items()}


@dataclass
class GateResult:
    """The gate's verdict on one month. `baseline` None with `no_baseline_reason` empty: the
    first benchmark (nothing gated, passes); with a reason: no usable baseline (fails)."""

    baseline: str | None
    checks: list[Check]
    missing: list[str]
    settings: dict[str, Any]
    baseline_reason: str = ""
    plan: list[PlanDifference] = field(default_factory=list)
    no_baseline_reason: str = ""
    # One line per baseline job whose labels differ from this month's: re-scored against the
    # current labels first (labels.rescore.relabel_baseline), or why it could not be.
    relabelled: list[str] = field(default_factory=list)

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if c.status == REGRESSION]

    @property
    def tested(self) -> list[Check]:
        """Checks that compared at least one query (the Holm family)."""
        return [c for c in self.checks if c.n > 0]

    @property
    def refused_plan(self) -> list[PlanDifference]:
        return [d for d in self.plan if not d.allowed]

    @property
    def no_checks_reason(self) -> str:
        """Why the gate compared nothing ('' when it compared something, or is the first)."""
        if self.baseline is None:
            return self.no_baseline_reason
        if self.tested:
            return ""
        if not self.checks:
            why = "; ".join(self.missing) or "nothing of this month is in the baseline"
            return f"no job and metric of this month could be paired with the baseline ({why})"
        return "no query was scored in both months (every check: no paired queries)"

    @property
    def reasons(self) -> list[str]:
        """Why the gate failed, one line each; empty when it passed."""
        out = []
        if self.no_checks_reason:
            out.append(f"no checks: {self.no_checks_reason}")
        if self.refused_plan:
            keys = sorted({d.key for d in self.refused_plan})
            out.append(
                "plan differs from the baseline: "
                + "; ".join(d.describe() for d in self.refused_plan)
                + f" (allow with benchmark.gate.allow_plan_changes=[{','.join(keys)}])"
            )
        if self.failures:
            out.append(f"{len(self.failures)} significant drop(s) beyond tolerance")
        return out

    @property
    def passed(self) -> bool:
        return not self.reasons

    @property
    def status(self) -> str:
        if not self.passed:
            return FAILED
        return NO_BASELINE if self.baseline is None else PASSED

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "passed": self.passed,
            "reasons": self.reasons,
            "baseline": self.baseline,
            "baseline_reason": self.baseline_reason or self.no_baseline_reason,
            "plan_differences": [d.to_json() for d in self.plan],
            "relabelled": self.relabelled,
            "settings": self.settings,
            "missing": self.missing,
            "failures": [c.to_json() for c in self.failures],
            "checks": [c.to_json() for c in self.checks],
        }


def run_gate(
    current: Mapping[JobKey, FinishedJob],
    baseline: Mapping[JobKey, FinishedJob] | None,
    gate: GateConfig,
    sig: SignificanceSettings,
    stage: str = "final",
    min_queries: int = 5,
    baseline_name: str = "baseline",
    baseline_reason: str = "",
) -> GateResult:
    """Check every job of `current` against its namesake in `baseline` (module docstring);
    `baseline` None: there is nothing to compare against (`GateResult` says what follows)."""
    # The gate's family: Holm at the gate's alpha, whatever the comparison's correction, and
    # CIs at 1 - alpha before the Holm step, so each agrees with its check's verdict.
    sig = gate_settings(gate, sig)
    settings = {
        "alpha": gate.alpha,
        "tolerances": dict(gate.tolerances),
        "types": list(gate.types) or "all types and all",
        "stage": stage,
        "n_resamples": sig.n_resamples,
        "seed": sig.seed,
        "confidence": sig.confidence,
        "correction": "Holm across every check of the run",
        "interval": "the sign-flip test inverted at the level of the check's Holm step",
        "allow_plan_changes": list(gate.allow_plan_changes),
    }
    if baseline is None:
        return GateResult(None, [], [], settings, baseline_reason=baseline_reason)
    checks: list[Check] = []
    samples: list[tuple[np.ndarray, np.ndarray]] = []
    missing: list[str] = []
    for key in sorted(current, key=str):
        job = current[key]
        before = baseline.get(key)
        if before is None:
            missing.append(f"{key}: no job in the baseline")
            continue
        shares = judge_shares(job, stage)
        for metric, tolerance in gate.tolerances.items():
            if not (job.has_metric(stage, metric) and before.has_metric(stage, metric)):
                missing.append(f"{key} {metric}: not a per-query metric of both months")
                continue
            types = _types(job, before, stage, metric, gate.types)
            now_values = values_by_type(job, stage, metric, types)
            old_values = values_by_type(before, stage, metric, types)
            seen: dict[tuple[str, ...], str] = {}
            for t in types:
                check, now, old = _check(
                    key, job, before, metric, t, now_values, old_values, tolerance
                )
                paired = set(now_values.get(t, {})) & set(old_values.get(t, {}))
                if shares and paired:
                    check.judged_share = float(np.mean([shares.get(q, 0.0) for q in paired]))
                if paired:  # the first type of these queries, or this one
                    first = seen.setdefault(tuple(sorted(paired)), t)
                    check.same_as = "" if first == t else first
                checks.append(check)
                samples.append((now, old))
    tested = [(c, pair) for c, pair in zip(checks, samples, strict=True) if c.n > 0]
    keys = family_keys([c for c, _ in tested])
    tests = family_tests([pair for _, pair in tested], sig, keys)
    for (c, _), test in zip(tested, tests, strict=True):
        r = test.result
        c.change, c.p_value = r.diff, r.p_value
        c.ci_low, c.ci_high, c.ci_level = r.ci_low, r.ci_high, test.ci_level
    # Holm over the same p-values again: `decide` also judges checks made by hand.
    decide(checks, gate, sig, min_queries)
    return GateResult(
        baseline_name,
        checks,
        missing,
        settings,
        baseline_reason=baseline_reason,
        plan=plan_differences(current, baseline, gate.allow_plan_changes),
    )


def gate_settings(gate: GateConfig, sig: SignificanceSettings) -> SignificanceSettings:
    """The significance settings of the gate's family: Holm at `gate.alpha`, CI base level
    1 - `gate.alpha`; resamples and seed as the comparison's."""
    return replace(sig, alpha=gate.alpha, confidence=1.0 - gate.alpha, correction="holm")


def decide(
    checks: Sequence[Check], gate: GateConfig, sig: SignificanceSettings, min_queries: int
) -> None:
    """Holm-adjust the p-values of the checks with paired queries (one family: the whole run;
    checks that repeat another's test, `same_as`, counted once) and give every check its
    status."""
    with_data = [c for c in checks if c.n > 0]
    keys = family_keys(with_data)
    tested = dict(zip(keys, (c.p_value for c in with_data), strict=True))
    adjusted = dict(zip(tested, holm(list(tested.values())), strict=True))
    for c, key in zip(with_data, keys, strict=True):
        c.p_holm = adjusted[key]
    for c in checks:
        _judge(c, len(tested), gate, sig, min_queries)


def family_keys(checks: Sequence[Check]) -> list[tuple[str, str, str, str, int]]:
    """One key per check, the same for checks that are one test: a check `same_as` a type has
    the key of that type's (first) check of the same job and metric; every other check a key
    of its own."""
    seen: dict[tuple[str, str, str, str], int] = {}
    out = []
    for c in checks:
        where = (c.dataset, c.retriever, c.metric, c.same_as or c.query_type)
        if c.same_as:
            out.append((*where, 0))
        else:
            seen[where] = seen.get(where, -1) + 1
            out.append((*where, seen[where]))
    return out


def _types(
    job: FinishedJob, before: FinishedJob, stage: str, metric: str, wanted: Sequence[str]
) -> list[str]:
    if wanted:
        return list(dict.fromkeys(wanted))
    seen = set(job.metric_query_types(stage, metric).values())
    seen |= set(before.metric_query_types(stage, metric).values())
    return ordered_types(list(seen))


def _check(
    key: JobKey,
    job: FinishedJob,
    before: FinishedJob,
    metric: str,
    qtype: str,
    now_values: Mapping[str, Mapping[str, float]],
    old_values: Mapping[str, Mapping[str, float]],
    tolerance: float,
) -> tuple[Check, np.ndarray, np.ndarray]:
    """The check of one type and metric, and its paired values (this month, baseline); its
    p-value and CI come from the gate's family (`run_gate`)."""
    _, arrays, unpaired = paired_values(
        {"before": old_values.get(qtype, {}), "after": now_values.get(qtype, {})}
    )
    now, old = arrays["after"], arrays["before"]
    n = int(now.size)
    nan = float("nan")
    check = Check(
        dataset=key.dataset,
        retriever=key.retriever,
        metric=metric,
        metric_before=before.resolve_metric(metric),
        metric_after=job.resolve_metric(metric),
        query_type=qtype,
        n=n,
        unpaired=unpaired,
        before=float(old.mean()) if n else nan,
        after=float(now.mean()) if n else nan,
        change=float(now.mean() - old.mean()) if n else nan,
        ci_low=nan,
        ci_high=nan,
        p_value=1.0,
        # Replaced by the Holm-adjusted value for every check with paired queries.
        p_holm=1.0,
        tolerance=tolerance,
    )
    return check, now, old


def _judge(
    c: Check, family: int, gate: GateConfig, sig: SignificanceSettings, min_queries: int
) -> None:
    if c.n == 0:
        c.status, c.note = NO_DATA, "no query scored in both months"
        return
    significant = c.p_holm < gate.alpha
    reason = too_few(c.n, family, gate_settings(gate, sig), min_queries)
    if c.loss > c.tolerance:
        if reason:
            c.status, c.note = UNDECIDED, reason
        elif significant:
            c.status = REGRESSION
        else:
            c.status = DROP
    elif -c.loss > c.tolerance and significant and not reason:
        c.status = IMPROVED
    else:
        c.status = OK
