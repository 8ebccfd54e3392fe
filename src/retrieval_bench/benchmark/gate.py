"""The regression gate: does any gated metric drop, per type, beyond tolerance and significantly?

Each check pairs one job of this month with the same dataset/retriever job of the baseline
month, on the queries both scored (by query id) in one query type (or `all`), for one gated
metric at each job's own top_k. Its change is mean(this month) - mean(baseline), with a paired
randomization p-value and a paired bootstrap CI; p-values are Holm-adjusted across every check
of the run, so the gate's false-alarm rate is alpha for the whole run, not per check.

A check *fails* (`regression`) when the drop exceeds its tolerance and the Holm-adjusted p is
below alpha. A drop beyond tolerance that is not significant is reported (`drop, not
significant`, or `drop, too few queries` when no difference could be significant) but passes:
the gate refuses changes on evidence, not on noise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from retrieval_bench.benchmark.config import GateConfig
from retrieval_bench.benchmark.history import JobKey
from retrieval_bench.compare.build import values_by_type
from retrieval_bench.compare.jobs import FinishedJob
from retrieval_bench.scoring.comparison import ordered_types, paired_change, too_few
from retrieval_bench.scoring.significance import SignificanceSettings, holm

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

    def message(self, confidence: float) -> str:
        name = (
            self.metric_after
            if self.metric_before == self.metric_after
            else f"{self.metric_before}->{self.metric_after}"
        )
        return (
            f"{self.status.upper()}: {self.dataset} retriever={self.retriever} "
            f"type={self.query_type} {name}: {self.before:.3f} -> {self.after:.3f} "
            f"(drop {-self.change:.3f} > tolerance {self.tolerance:g}; "
            f"{confidence:.0%} CI of the change [{self.ci_low:+.3f}, {self.ci_high:+.3f}]; "
            f"p={self.p_value:.4g}, Holm p={self.p_holm:.4g}; n={self.n} queries)"
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class GateResult:
    baseline: str | None
    checks: list[Check]
    missing: list[str]
    settings: dict[str, Any]

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if c.status == REGRESSION]

    @property
    def passed(self) -> bool:
        return not self.failures

    def to_json(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline,
            "passed": self.passed,
            "settings": self.settings,
            "missing": self.missing,
            "failures": [c.to_json() for c in self.failures],
            "checks": [c.to_json() for c in self.checks],
        }


def run_gate(
    current: Mapping[JobKey, FinishedJob],
    baseline: Mapping[JobKey, FinishedJob],
    gate: GateConfig,
    sig: SignificanceSettings,
    stage: str = "final",
    min_queries: int = 5,
    baseline_name: str | None = None,
) -> GateResult:
    settings = {
        "alpha": gate.alpha,
        "tolerances": dict(gate.tolerances),
        "types": list(gate.types) or "all types and all",
        "stage": stage,
        "n_resamples": sig.n_resamples,
        "seed": sig.seed,
        "confidence": sig.confidence,
        "correction": "Holm across every check of the run",
    }
    checks: list[Check] = []
    missing: list[str] = []
    for key in sorted(current, key=str):
        job = current[key]
        before = baseline.get(key)
        if before is None:
            missing.append(f"{key}: no job in the baseline")
            continue
        for metric, tolerance in gate.tolerances.items():
            if not (job.has_metric(stage, metric) and before.has_metric(stage, metric)):
                missing.append(f"{key} {metric}: not a per-query metric of both months")
                continue
            types = _types(job, before, stage, gate.types)
            now_values = values_by_type(job, stage, metric, types)
            old_values = values_by_type(before, stage, metric, types)
            for t in types:
                checks.append(
                    _check(key, job, before, metric, t, now_values, old_values, tolerance, sig)
                )
    tested = [c for c in checks if c.n > 0]
    for c, p in zip(tested, holm([c.p_value for c in tested]), strict=True):
        c.p_holm = p
    for c in checks:
        _judge(c, len(tested), gate, sig, min_queries)
    return GateResult(baseline_name, checks, missing, settings)


def _types(job: FinishedJob, before: FinishedJob, stage: str, wanted: Sequence[str]) -> list[str]:
    if wanted:
        return list(dict.fromkeys(wanted))
    seen = set(job.query_types(stage).values()) | set(before.query_types(stage).values())
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
    sig: SignificanceSettings,
) -> Check:
    result, unpaired = paired_change(old_values.get(qtype, {}), now_values.get(qtype, {}), sig)
    return Check(
        dataset=key.dataset,
        retriever=key.retriever,
        metric=metric,
        metric_before=before.resolve_metric(metric),
        metric_after=job.resolve_metric(metric),
        query_type=qtype,
        n=result.n,
        unpaired=unpaired,
        before=result.mean_b,
        after=result.mean_a,
        change=result.diff,
        ci_low=result.ci_low,
        ci_high=result.ci_high,
        p_value=result.p_value,
        # Replaced by the Holm-adjusted value for every check with paired queries.
        p_holm=result.p_value,
        tolerance=tolerance,
    )


def _judge(
    c: Check, family: int, gate: GateConfig, sig: SignificanceSettings, min_queries: int
) -> None:
    if c.n == 0:
        c.status, c.note = NO_DATA, "no query scored in both months"
        return
    significant = c.p_holm < gate.alpha
    reason = too_few(c.n, family, sig, min_queries)
    if -c.change > c.tolerance:
        if reason:
            c.status, c.note = UNDECIDED, reason
        elif significant:
            c.status = REGRESSION
        else:
            c.status = DROP
    elif c.change > c.tolerance and significant and not reason:
        c.status = IMPROVED
    else:
        c.status = OK
