"""The regression gate's rules, in-process on hand-made checks and jobs: every check status, the
tolerance boundary, Holm across the run, the "too few queries" rule, and the gate's verdict
(no baseline, no checks, plan differences)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from retrieval_bench.benchmark.gate import (
    DROP,
    IMPROVED,
    NO_DATA,
    OK,
    REGRESSION,
    UNDECIDED,
    Check,
    GateResult,
    PlanDifference,
    decide,
    flat_config,
    plan_differences,
    run_gate,
)
from retrieval_bench.benchmark.history import JobKey
from retrieval_bench.compare.build import values_by_type
from retrieval_bench.config.benchmark import GateConfig
from retrieval_bench.jobdir.read import FinishedJob
from retrieval_bench.stats.corrections import family_tests
from retrieval_bench.stats.settings import SignificanceSettings

GATE = GateConfig(tolerances={"recall@K": 0.02}, alpha=0.05)
SIG = SignificanceSettings(alpha=0.05, n_resamples=10000)
MIN_QUERIES = 5
KEY = JobKey("synth", "bm25")


def check(change: float, p: float, n: int = 20, tolerance: float = 0.02) -> Check:
    """A check whose paired test gave `p` for a mean change of `change` from 0.5."""
    return Check(
        dataset="synth",
        retriever="bm25",
        metric="recall@K",
        metric_before="recall@6",
        metric_after="recall@6",
        query_type="all",
        n=n,
        unpaired=0,
        before=0.5,
        after=0.5 + change,
        change=change,
        ci_low=change,
        ci_high=change,
        p_value=p,
        p_holm=p,
        tolerance=tolerance,
    )


def judged(*checks: Check) -> list[tuple[str, float]]:
    decide(checks, GATE, SIG, MIN_QUERIES)
    return [(c.status, c.p_holm) for c in checks]


def verdict(*checks: Check) -> GateResult:
    decide(checks, GATE, SIG, MIN_QUERIES)
    return GateResult("2026-09", list(checks), [], {})


def test_a_significant_drop_beyond_tolerance_is_a_regression() -> None:
    result = verdict(check(-0.1, 0.001))
    assert [(c.status, c.p_holm) for c in result.checks] == [(REGRESSION, 0.001)]
    assert (result.passed, result.status) == (False, "failed")
    assert result.reasons == ["1 significant drop(s) beyond tolerance"]


def test_a_drop_within_tolerance_passes_however_significant() -> None:
    assert judged(check(-0.01, 0.0001)) == [(OK, 0.0001)]


def test_the_tolerance_boundary_a_drop_equal_to_it_passes_one_above_fails() -> None:
    # 0.25 and 0.5 are exact in binary: the comparison is on the very values written here.
    assert judged(check(-0.25, 0.001, tolerance=0.25)) == [(OK, 0.001)]
    assert judged(check(-0.25 - 2**-20, 0.001, tolerance=0.25)) == [(REGRESSION, 0.001)]
    # The default tolerance too: a drop of exactly 0.02 passes.
    assert judged(check(-0.02, 0.001)) == [(OK, 0.001)]


def test_a_drop_beyond_tolerance_that_is_not_significant_passes() -> None:
    # Ignoring significance would fail this gate: the drop is 5x the tolerance.
    result = verdict(check(-0.1, 0.2))
    assert [(c.status, c.p_holm) for c in result.checks] == [(DROP, 0.2)]
    assert (result.passed, result.status, result.reasons) == (True, "passed", [])


def test_holm_across_the_checks_turns_two_significant_drops_into_noise() -> None:
    # Alone each is significant (0.03, 0.04 < 0.05); Holm over the two: 2 x 0.03 = 0.06 and
    # max(0.06, 1 x 0.04) = 0.06, neither below alpha.
    result = verdict(check(-0.1, 0.03), check(-0.1, 0.04))
    assert [(c.status, c.p_holm) for c in result.checks] == [(DROP, 0.06), (DROP, 0.06)]
    assert result.passed
    # Each alone fails the gate.
    assert judged(check(-0.1, 0.03)) == [(REGRESSION, 0.03)]
    assert judged(check(-0.1, 0.04)) == [(REGRESSION, 0.04)]


def test_checks_without_paired_queries_are_no_data_and_outside_the_holm_family() -> None:
    empty = check(0.0, 1.0, n=0)
    assert judged(empty, check(-0.1, 0.03)) == [(NO_DATA, 1.0), (REGRESSION, 0.03)]
    assert empty.note == "no query scored in both months"


def test_checks_without_paired_queries_do_not_count_in_the_family_size() -> None:
    # n=6: the smallest p is 2/2**6 = 0.03125, below alpha in a family of one. Beside a check
    # with no paired query (no test at all) the family is still one: a regression, not "too
    # few queries" as a family of two would make it.
    small, empty = check(-0.5, 0.03125, n=6), check(0.0, 1.0, n=0)
    assert judged(small, empty) == [(REGRESSION, 0.03125), (NO_DATA, 1.0)]
    assert small.note == ""


def test_too_few_queries_below_min_queries() -> None:
    few = check(-0.5, 0.001, n=4)
    assert judged(few) == [(UNDECIDED, 0.001)]
    assert few.note == "too few queries to decide (n=4 < 5)"


def test_too_few_queries_counts_the_whole_family() -> None:
    # n=6 pairs: the smallest sign-flip p is 2/2**6 = 0.03125. Alone that can reach alpha...
    alone = check(-0.5, 0.03125, n=6)
    assert judged(alone) == [(REGRESSION, 0.03125)]
    # ...in a family of two, Holm doubles it to 0.0625: no difference on 6 queries could be
    # significant, so the drop is undecided (not "not significant").
    small, other = check(-0.5, 0.03125, n=6), check(0.0, 0.5)
    assert judged(small, other) == [(UNDECIDED, 0.0625), (OK, 0.5)]
    assert small.note == "too few queries to decide (n=6: no difference could be significant)"


def test_a_significant_rise_beyond_tolerance_is_improved() -> None:
    assert judged(check(0.1, 0.001)) == [(IMPROVED, 0.001)]
    assert judged(check(0.1, 0.2)) == [(OK, 0.2)]
    assert judged(check(0.02, 0.001)) == [(OK, 0.001)]


# --- Through run_gate, on jobs held in memory ---------------------------------------------


def job(
    values: dict[str, tuple[str, float]],
    dataset: str = "synth",
    config: dict[str, Any] | None = None,
    files: dict[str, str] | None = None,
) -> FinishedJob:
    """A finished job: query id -> (query type, recall@6)."""
    per_query = {q: {"query_type": t, "recall@6": v} for q, (t, v) in values.items()}
    return FinishedJob(
        path=Path(dataset),
        metrics={"stages": {"final": {"per_query": per_query}}},
        config={"top_k": 6, "dataset": {"name": dataset}, **(config or {})},
        overrides={},
        choices={"retriever": "bm25"},
        num=None,
        manifest={"dataset": {"name": dataset, "files_sha256": files or {}}},
    )


def pairs(value: float, n: int = 10, qtype: str = "pair") -> dict[str, tuple[str, float]]:
    return {f"q{i:02d}": (qtype, value) for i in range(n)}


def test_run_gate_exact_values_on_a_constant_drop() -> None:
    # Every query drops by 0.5: the sign-flip p is exact, 2/2**10. One query type: its check
    # and `all` pair the same queries, one test (`same_as`), so the Holm family has one member
    # and both rows show it alike: p 2/1024, not 2 x 2/1024.
    result = run_gate({KEY: job(pairs(0.5))}, {KEY: job(pairs(1.0))}, GATE, SIG)
    got = [(c.query_type, c.n, c.before, c.after, c.change, c.status) for c in result.checks]
    assert got == [
        ("pair", 10, 1.0, 0.5, -0.5, REGRESSION),
        ("all", 10, 1.0, 0.5, -0.5, REGRESSION),
    ]
    assert [(c.p_value, c.p_holm) for c in result.checks] == [(2 / 1024, 2 / 1024)] * 2
    assert [c.same_as for c in result.checks] == ["", "pair"]
    pair, every = (c.to_json() for c in result.checks)
    assert {k: v for k, v in pair.items() if k not in ("query_type", "same_as")} == {
        k: v for k, v in every.items() if k not in ("query_type", "same_as")
    }
    assert (result.status, result.plan, result.missing) == ("failed", [], [])
    # Two types: three distinct tests, and Holm over three.
    two = {**pairs(0.5, 5, "a"), **{f"r{i}": ("b", 0.5) for i in range(5)}}
    old = {**pairs(1.0, 5, "a"), **{f"r{i}": ("b", 1.0) for i in range(5)}}
    result = run_gate({KEY: job(two)}, {KEY: job(old)}, GATE, SIG)
    assert [c.same_as for c in result.checks] == ["", "", ""]
    assert result.checks[2].p_holm == min(1.0, 3 * 2 / 1024)


def test_no_baseline_at_all_passes_with_nothing_gated() -> None:
    result = run_gate({KEY: job(pairs(0.5))}, None, GATE, SIG, baseline_reason="first")
    assert (result.status, result.passed, result.checks, result.reasons) == (
        "no baseline",
        True,
        [],
        [],
    )
    # Earlier months exist but none passed its gate: no checks, and the gate fails.
    result.no_baseline_reason = "no earlier finished month passed its gate (2026-10 (gate failed))"
    assert (result.status, result.reasons) == (
        "failed",
        ["no checks: no earlier finished month passed its gate (2026-10 (gate failed))"],
    )


def test_a_gate_that_checked_nothing_fails_with_its_reason() -> None:
    # The baseline month ran another dataset: nothing of this month can be paired.
    travel = JobKey("travel", "bm25")
    result = run_gate({KEY: job(pairs(1.0))}, {travel: job(pairs(1.0), "travel")}, GATE, SIG)
    assert (result.checks, result.passed) == ([], False)
    assert result.reasons == [
        "no checks: no job and metric of this month could be paired with the baseline "
        "(synth/bm25: no job in the baseline)",
        'plan differs from the baseline: benchmark.datasets: ["travel"] -> ["synth"] '
        "(allow with benchmark.gate.allow_plan_changes=[benchmark.datasets])",
    ]


def test_a_gate_whose_checks_paired_no_query_fails() -> None:
    before = {f"old{i}": ("pair", 1.0) for i in range(10)}
    result = run_gate({KEY: job(pairs(1.0))}, {KEY: job(before)}, GATE, SIG)
    assert [(c.query_type, c.n, c.status) for c in result.checks] == [
        ("pair", 0, NO_DATA),
        ("all", 0, NO_DATA),
    ]
    assert result.reasons == [
        "no checks: no query was scored in both months (every check: no paired queries)"
    ]


def test_every_plan_difference_is_named_and_fails_unless_allowed() -> None:
    before = job(
        pairs(1.0),
        config={"top_k": 6, "encoder": {"model": "a"}, "cache_dir": "/x"},
        files={"passages.jsonl": "1" * 64},
    )
    after = job(
        pairs(1.0),
        config={"top_k": 8, "encoder": {"model": "b"}, "cache_dir": "/y", "new_key": 1},
        files={"passages.jsonl": "2" * 64},
    )
    # recall@K: @6 in the baseline, @8 now; both jobs hold recall@6 values only here.
    after.metrics["stages"]["final"]["per_query"] = {
        q: {"query_type": t, "recall@8": v} for q, (t, v) in pairs(1.0).items()
    }
    dense = JobKey("synth", "dense")
    gate = GateConfig(tolerances={"recall@K": 0.02}, allow_plan_changes=["top_k", "dataset"])
    result = run_gate({KEY: after, dense: after}, {KEY: before}, gate, SIG)
    assert result.plan == [
        PlanDifference("benchmark.retrievers", '["bm25"]', '["bm25","dense"]', ["synth"]),
        PlanDifference("encoder.model", "a", "b", ["synth/bm25"]),
        PlanDifference("top_k", "6", "8", ["synth/bm25"], allowed=True),
        PlanDifference(
            "dataset.files.passages.jsonl", "1" * 12, "2" * 12, ["synth/bm25"], allowed=True
        ),
    ]
    assert result.reasons == [
        "plan differs from the baseline: "
        'benchmark.retrievers: ["bm25"] -> ["bm25","dense"] (synth); '
        "encoder.model: a -> b (synth/bm25) "
        "(allow with benchmark.gate.allow_plan_changes=[benchmark.retrievers,encoder.model])"
    ]
    assert [(c.metric_before, c.metric_after, c.status) for c in result.checks] == [
        ("recall@6", "recall@8", OK),
        ("recall@6", "recall@8", OK),
    ]
    allowed = GateConfig(allow_plan_changes=["benchmark", "encoder", "top_k", "dataset"])
    assert run_gate({KEY: after, dense: after}, {KEY: before}, allowed, SIG).passed


def test_a_dataset_file_added_or_removed_is_a_plan_difference() -> None:
    # The baseline read passages.jsonl and entities.jsonl; this month reads passages.jsonl and
    # a new lexicon.jsonl: each file present in one month only is named, as absent in the other.
    before = job(pairs(1.0), files={"passages.jsonl": "1" * 64, "entities.jsonl": "3" * 64})
    after = job(pairs(1.0), files={"passages.jsonl": "1" * 64, "lexicon.jsonl": "2" * 64})
    assert plan_differences({KEY: after}, {KEY: before}) == [
        PlanDifference("dataset.files.entities.jsonl", "3" * 12, "(absent)", ["synth/bm25"]),
        PlanDifference("dataset.files.lexicon.jsonl", "(absent)", "2" * 12, ["synth/bm25"]),
    ]


def test_flat_config_keeps_what_a_job_measured() -> None:
    config = {
        "top_k": 6,
        "retriever": {"arms": ["bm25", "dense"], "pool_size": 10},
        "filters": {},
        "cache_dir": "/c",
        "hydra": {"x": 1},
        "compare": {"alpha": 0.05},
        "benchmark": {"enabled": False},
    }
    assert flat_config(config) == {
        "top_k": "6",
        "retriever.arms": '["bm25","dense"]',
        "retriever.pool_size": "10",
        "filters": "{}",
    }


@pytest.mark.parametrize(
    ("allowed", "refused"),
    [
        ([], ["arms.bm25.k1"]),
        (["arms.bm25"], []),
        (["arms.bm25.k1"], []),
        (["arms.bm2"], ["arms.bm25.k1"]),
        (["bm25"], []),  # an old spelling of the key names its new home
    ],
)
def test_allowed_keys_match_whole_key_parts(allowed: list[str], refused: list[str]) -> None:
    before = job(pairs(1.0), config={"arms": {"bm25": {"k1": 1.5}}})
    after = job(pairs(1.0), config={"arms": {"bm25": {"k1": 0.5}}})
    differences = plan_differences({KEY: after}, {KEY: before}, allowed)
    assert [d.key for d in differences if not d.allowed] == refused


def _two_type_job(path: str, values: dict[str, float]) -> FinishedJob:
    per_query = {
        q: {"query_type": "pair" if int(q[1:]) % 2 else "deep", "recall@3": v}
        for q, v in values.items()
    }
    return FinishedJob(
        path=Path(path),
        metrics={"stages": {"final": {"per_query": per_query}}},
        config={"top_k": 3, "dataset": {"name": "synth"}},
        overrides={},
        choices={"retriever": "bm25"},
        num=None,
    )


def test_gate_on_some_types_only() -> None:
    """`benchmark.gate.types` without `all`: only the named types are checked."""
    before = _two_type_job("old", {f"q{i}": 1.0 for i in range(20)})
    after = _two_type_job("new", {f"q{i}": 0.0 if i % 2 else 1.0 for i in range(20)})
    assert set(values_by_type(after, "final", "recall@K", ["pair"])) == {"pair", "deep", "all"}
    key = JobKey("synth", "bm25")
    gate = GateConfig(tolerances={"recall@K": 0.02}, types=["pair"])
    result = run_gate({key: after}, {key: before}, gate, SIG)
    assert [(c.query_type, c.n, c.change, c.status) for c in result.checks] == [
        ("pair", 10, -1.0, "regression")
    ]
    assert result.checks[0].p_holm == result.checks[0].p_value


def _gate_job(values: dict[str, tuple[str, float]]) -> FinishedJob:
    per_query = {q: {"query_type": t, "recall@6": v} for q, (t, v) in values.items()}
    return FinishedJob(
        path=Path("synth"),
        metrics={"stages": {"final": {"per_query": per_query}}},
        config={"top_k": 6, "dataset": {"name": "synth"}},
        overrides={},
        choices={"retriever": "bm25"},
        num=None,
        manifest={"dataset": {"name": "synth", "files_sha256": {}}},
    )


def test_the_gate_ci_is_its_holm_familys() -> None:
    rng = np.random.default_rng(5)
    old = rng.uniform(0.3, 1.0, 14)
    new = old - 0.2 + rng.normal(0, 0.1, 14)
    before = {f"q{i:02d}": ("a" if i < 7 else "b", float(v)) for i, v in enumerate(old)}
    after = {f"q{i:02d}": ("a" if i < 7 else "b", float(v)) for i, v in enumerate(new)}
    key = JobKey("synth", "bm25")
    gate = GateConfig(tolerances={"recall@K": 0.02}, alpha=0.05)
    sig = SignificanceSettings(n_resamples=10_000, confidence=0.9)  # the gate uses 1 - alpha
    result = run_gate({key: _gate_job(after)}, {key: _gate_job(before)}, gate, sig)
    pairs = []
    for t in ("a", "b"):
        qids = [q for q, (qt, _) in before.items() if qt == t]
        pairs.append(
            (np.array([after[q][1] for q in qids]), np.array([before[q][1] for q in qids]))
        )
    pairs.append((new, old))
    expected = family_tests(pairs, SignificanceSettings(n_resamples=10_000))
    for check, test in zip(result.checks, expected, strict=True):
        assert (check.ci_low, check.ci_high, check.ci_level) == (
            test.result.ci_low,
            test.result.ci_high,
            test.ci_level,
        )
        assert check.p_holm == test.p_adjusted
        # The CI excludes 0 exactly where the check is significant.
        assert (check.ci_high < 0) == (check.p_holm < 0.05)
    assert [c.status for c in result.checks] == [REGRESSION] * 3
    # 7 queries per type: Holm levels over three checks, 1 - 0.05 / (3 - i).
    assert sorted(c.ci_level for c in result.checks) == pytest.approx(
        [0.95, 1 - 0.05 / 2, 1 - 0.05 / 3]
    )
    json.dumps([c.to_json() for c in result.checks], allow_nan=False)


def test_a_baseline_month_of_the_old_key_spellings_is_compared_key_by_key() -> None:
    """A month recorded before the keys moved (bm25.k1, retriever.rrf_k) is read with the new
    names, so a change across the rename is a difference and an unchanged value is none."""
    before = job(pairs(1.0), config={"bm25": {"k1": 1.5, "b": 0.75}, "retriever": {"rrf_k": 60}})
    after = job(
        pairs(1.0),
        config={"arms": {"bm25": {"k1": 0.5, "b": 0.75}}, "combiners": {"rrf": {"k": 60}}},
    )
    differences = plan_differences({KEY: after}, {KEY: before})
    assert [(d.key, d.before, d.after) for d in differences] == [("arms.bm25.k1", "1.5", "0.5")]
