"""Statistics that agree with themselves: Holm families, CIs from the same test and step,
`lose` with two systems, p-values at the resampling floor, the weak flag against the ideal
bound, and cut-offs deeper than the list.

Independent code: scipy's exact permutation test (the p-value, and the CI ends re-tested) and
a textbook Holm written here.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURE, compose_config, config_record

from retrieval_bench.compare.build import compare_dataset, settings_record
from retrieval_bench.config.compare import CompareConfig
from retrieval_bench.errors import ConfigError
from retrieval_bench.job.runner import run_job
from retrieval_bench.jobdir.read import FinishedJob
from retrieval_bench.reports.comparison import comparison_markdown
from retrieval_bench.reports.markdown import job_report
from retrieval_bench.scoring.comparison import (
    LOSE,
    TIE,
    WIN,
    delta_families,
    family_key,
    verdict_cell,
    verdict_cells,
)
from retrieval_bench.scoring.significance import (
    SignificanceSettings,
    at_floor,
    family_tests,
    holm_levels,
    paired_test,
)

SIG = SignificanceSettings(n_resamples=10_000)
# n = 12 (exact: 2**12 <= 10 000). Sign-flip p = 66/2048 = 0.0322; the unadjusted 95% interval
# excludes 0, so with a second such test in the family Holm p = 0.0645 ("tie") sits beside it:
# the contradiction the issue reported.
A = np.array([0.9, 0.7, 0.1, 0.6, 0.5, 0.8, 0.1, 0.4, 0.5, 0.9, 0.8, 0.5])
B = np.array([0.1, 0.7, 0.2, 0.3, 0.1, 0.3, 0.5, 0.3, 0.2, 0.6, 0.6, 0.1])


def scipy_p(d: np.ndarray) -> float:
    """scipy's exact two-sided sign-flip p-value of mean(d) = 0."""
    from scipy import stats  # here, not at collection (see tests/support/references.py)

    res = stats.permutation_test(
        (d, np.zeros_like(d)),
        lambda x, y, axis: np.mean(x - y, axis=axis),
        permutation_type="samples",
        vectorized=True,
        n_resamples=np.inf,
    )
    return float(res.pvalue)


def textbook_holm(p: list[float]) -> list[float]:
    order = np.argsort(p, kind="stable")
    m = len(p)
    steps = np.maximum.accumulate([(m - i) * p[j] for i, j in enumerate(order)])
    out = np.empty(m)
    out[order] = np.minimum(steps, 1.0)
    return out.tolist()


def _values(columns: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    return {label: {f"q{i:02d}": float(v) for i, v in enumerate(c)} for label, c in columns.items()}


# --- (a) the CI is the test inverted, at its Holm step ---------------------------------


def test_p_value_equals_scipys_exact_test() -> None:
    result = paired_test(A, B, SIG)
    assert result.p_value == 66 / 2048
    assert result.p_value == pytest.approx(scipy_p(A - B), rel=1e-12)


@pytest.mark.parametrize("confidence", [0.95, 0.975])
def test_ci_ends_are_where_scipys_test_starts_rejecting(confidence: float) -> None:
    d = A - B
    low, high = paired_test(A, B, SignificanceSettings(confidence=confidence)).ci_low, None
    result = paired_test(A, B, SignificanceSettings(confidence=confidence))
    low, high = result.ci_low, result.ci_high
    alpha = 1 - confidence
    # Inside (ends included): scipy does not reject; just outside: it does.
    for delta in (low, high, result.diff):
        assert scipy_p(d - delta) >= alpha - 1e-12, delta
    for delta in (low - 1e-6, high + 1e-6):
        assert scipy_p(d - delta) < alpha, delta


def test_family_table_makes_the_reported_contradiction_agree() -> None:
    cells = {("recall@K", t): _values({"A": A, "B": B}) for t in ("fact", "all")}
    by_cell = verdict_cells(cells, SIG, family_of=family_key("cell"), family_name="cell")
    by_table = verdict_cells(cells, SIG, family_of=family_key("table"), family_name="table")
    p = 66 / 2048
    for key in cells:
        alone = by_cell[key].tests["B"]
        assert (alone["p_value"], alone["p_holm"], alone["ci_level"]) == (p, p, 0.95)
        assert by_cell[key].verdicts == {"A": WIN, "B": LOSE}
        assert alone["ci_low"] > 0  # significant, and its interval says so
        test = by_table[key].tests["B"]
        assert test["p_holm"] == textbook_holm([p, p])[0] == 2 * p
        assert by_table[key].verdicts == {"A": TIE, "B": TIE}
        # Holm stopped at its first step (alpha / 2): both intervals are 97.5% ones, and hold 0.
        assert test["ci_level"] == 0.975 and test["family"] == "table"
        assert test["ci_low"] <= 0 <= test["ci_high"] and test["ci_agrees"]
        assert scipy_p(A - B - test["ci_low"]) >= 0.025


def test_holm_levels_follow_the_steps() -> None:
    # Sorted 0.001, 0.01, 0.04 (m = 3): alpha/3 and alpha/2 reject, alpha/1 does not.
    assert holm_levels([0.04, 0.001, 0.01], 0.05, 0.95) == pytest.approx(
        [0.95, 1 - 0.05 / 3, 0.975]
    )
    # Holm stops at the first step: every test gets that step's level.
    assert holm_levels([0.03, 0.04], 0.05, 0.95) == pytest.approx([0.975, 0.975])


def test_family_tests_adjust_like_the_textbook() -> None:
    rng = np.random.default_rng(4)
    pairs = [(rng.random(40), rng.random(40) - shift) for shift in (0.0, 0.1, 0.2, 0.05)]
    tests = family_tests(pairs, SIG)
    raw = [t.result.p_value for t in tests]
    assert [t.p_holm for t in tests] == pytest.approx(textbook_holm(raw), rel=1e-15)
    for t in tests:
        excludes = t.result.ci_low > 0 or t.result.ci_high < 0
        assert excludes == (t.p_holm < SIG.alpha) and t.ci_agrees


# --- (b) the family is explicit -----------------------------------------------------------


def test_family_metric_spans_the_types_of_one_metric() -> None:
    strong = _values({"A": A + 0.3, "B": B})
    weak = _values({"A": A, "B": B})
    cells = {("ndcg@K", "x"): strong, ("ndcg@K", "y"): weak, ("hit@K", "y"): weak}
    out = verdict_cells(cells, SIG, family_of=family_key("metric"), family_name="metric")
    p_ndcg = [out[("ndcg@K", t)].tests["B"]["p_value"] for t in ("x", "y")]
    expected = textbook_holm(p_ndcg)
    assert [out[("ndcg@K", t)].tests["B"]["p_holm"] for t in ("x", "y")] == expected
    # hit@K is its own family of one test.
    assert out[("hit@K", "y")].tests["B"]["p_holm"] == 66 / 2048


def test_ablation_deltas_share_the_family() -> None:
    base = {f"q{i}": float(v) for i, v in enumerate(B)}
    up = {f"q{i}": float(v) for i, v in enumerate(A)}
    cells = {(m, "all"): (base, {"top_k=8": up}) for m in ("recall@K", "mrr@K")}
    deltas = delta_families(cells, SIG, family_of=family_key("table"), family_name="table")
    for (delta,) in deltas.values():
        assert delta.p_value == 66 / 2048 and delta.p_holm == 2 * 66 / 2048
        assert not delta.significant and delta.ci_level == 0.975 and delta.family == "table"


def test_compare_family_is_validated() -> None:
    with pytest.raises(ConfigError, match=r"compare\.family"):
        CompareConfig(family="row").validate()
    with pytest.raises(ConfigError, match=r"compare\.weak_below"):
        CompareConfig(weak_below=2.0).validate()
    assert CompareConfig().family == "table"


# --- (c) two systems: the loser loses -----------------------------------------------------


def test_two_systems_loser_is_lose_three_have_a_second() -> None:
    n = 12
    two = verdict_cell(_values({"A": np.ones(n), "B": np.zeros(n)}), SIG)
    assert two.verdicts == {"A": WIN, "B": LOSE}
    three = verdict_cell(_values({"A": np.ones(n), "B": np.full(n, 0.5), "C": np.zeros(n)}), SIG)
    assert three.verdicts == {"A": WIN, "B": "second", "C": LOSE}


# --- comparison records from hand-made jobs (d, e, f) ------------------------------------


def _job(name: str, recall: list[float], n_relevant: int = 4, top_k: int = 2) -> FinishedJob:
    rows = {
        f"q{i:02d}": {
            "query_type": "fact",
            "n_relevant": n_relevant,
            f"recall@{top_k}": v,
            f"hit@{top_k}": float(v > 0),
        }
        for i, v in enumerate(recall)
    }
    return FinishedJob(
        path=Path(name),
        metrics={"stages": {"final": {"per_query": rows}}},
        config={"top_k": top_k, "dataset": {"name": "synth"}},
        overrides={"retriever": name},
        choices={"retriever": name},
        num=None,
    )


def _markdown(jobs: list[FinishedJob], cfg: CompareConfig) -> tuple[dict, str]:
    ds = compare_dataset(jobs, cfg)
    return ds, comparison_markdown({"settings": settings_record(cfg), "datasets": {"synth": ds}})


def test_p_value_at_the_resampling_floor_prints_as_a_bound() -> None:
    # 30 queries all better by 0.25: 2**30 patterns > 10 000 resamples, none as extreme.
    jobs = [_job("bm25", [0.5] * 30), _job("dense", [0.25] * 30)]
    cfg = CompareConfig(metrics=["recall@K"], family="cell")
    ds, text = _markdown(jobs, cfg)
    test = ds["cells"]["recall@K"]["all"]["tests"]["retriever=dense"]
    assert test["p_value"] == 2 / 10_001 and test["p_at_floor"]
    assert at_floor(test["p_value"], 30, 10_000) and not at_floor(0.001, 30, 10_000)
    tests_row = "| all | 30 | retriever=bm25 | retriever=dense |"
    row = next(line for line in text.splitlines() if line.startswith(tests_row))
    assert row.endswith("| < 0.0002 | < 0.0002 | +0/-30/=0 | no variation |")
    assert "0.0002 |" not in row.replace("< 0.0002 |", "")
    assert "`compare.family=cell`" in text
    # In a family of two the Holm p-value is twice the floor, and an upper bound too.
    _, text = _markdown(jobs, CompareConfig(metrics=["recall@K"], family="table"))
    row = next(line for line in text.splitlines() if line.startswith(tests_row))
    assert row.endswith("| < 0.0002 | ≤ 0.0004 | +0/-30/=0 | no variation |")


def test_all_weak_compares_against_the_ideal_bound() -> None:
    # 4 relevant, K = 2: recall_bound@2 = 0.5. 0.3 is 60% of what any ranking could reach:
    # not weak (the fixed 0.5 rule flagged it); 0.2 is 40%: weak.
    cfg = CompareConfig(metrics=["recall@K"])
    ds, _ = _markdown([_job("bm25", [0.3] * 12), _job("dense", [0.1] * 12)], cfg)
    entry = ds["best"]["all"]["recall@K"]
    assert (entry["bound"], entry["all_weak"]) == (0.5, False)
    ds, _ = _markdown([_job("bm25", [0.2] * 12), _job("dense", [0.1] * 12)], cfg)
    entry = ds["best"]["all"]["recall@K"]
    assert (entry["bound"], entry["all_weak"]) == (0.5, True)
    assert entry["text"] == "retriever=bm25 (all weak: best 0.200 < 0.5 x bound 0.500)"
    # hit@K: the ideal is 1 whatever |G| is.
    cfg_hit = CompareConfig(metrics=["hit@K"])
    ds, _ = _markdown([_job("bm25", [0.2] * 4 + [0.0] * 8), _job("dense", [0.0] * 12)], cfg_hit)
    entry = ds["best"]["all"]["hit@K"]
    assert (entry["bound"], entry["all_weak"]) == (1.0, True)


def test_cutoff_deeper_than_the_list_is_flagged(tmp_path: Path, shared_cache: Path) -> None:
    overrides = [
        "dataset.name=mini",
        f"dataset.corpus={FIXTURE / 'corpus' / 'mini'}",
        f"dataset.evalset={FIXTURE / 'evalsets' / 'mini.jsonl'}",
        f"cache_dir={shared_cache}",
        "retriever=bm25",
        "top_k=6",
        "scoring.cutoffs=[10]",
    ]
    cfg = compose_config(overrides)
    result = run_job(cfg)
    stages = result.metrics["stages"]
    # final holds top_k = 6: @10 is not measured at 10. bm25's pool holds 10: nothing to flag.
    assert stages["final"]["depth_exceeds_list"] == {"list_length": 6, "cutoffs": [10]}
    assert "depth_exceeds_list" not in stages["bm25"]
    json.dumps(stages["final"]["depth_exceeds_list"])
    report = job_report(result, config_record(cfg))
    final = report[report.index("## Stage `final`") :]
    assert "@10 ‡ deeper than this stage's lists (6): not measured" in final
    assert "@6\n" in final
    bm25 = report[report.index("## Stage `bm25`") : report.index("## Stage `final`")]
    assert "‡" not in bm25


def test_comparison_marks_a_metric_deeper_than_the_list() -> None:
    jobs = [_job("bm25", [0.5] * 12), _job("dense", [0.25] * 12)]
    for job in jobs:
        job.metrics["stages"]["final"]["depth_exceeds_list"] = {"list_length": 2, "cutoffs": [3]}
        for row in job.metrics["stages"]["final"]["per_query"].values():
            row["recall@3"] = row["recall@2"]
    ds, text = _markdown(jobs, CompareConfig(metrics=["recall@3", "recall@K"]))
    deep = {m["spec"]: m["depth_exceeds_list"] for m in ds["metrics"]}
    assert deep == {"recall@3": {"retriever=bm25": 2, "retriever=dense": 2}, "recall@K": {}}
    lists = "retriever=bm25: lists of 2, retriever=dense: lists of 2"
    assert f"## recall@3 ‡ deeper than the list ({lists})" in text
    assert "## recall@2\n" in text
