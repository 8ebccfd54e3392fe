"""Statistics that agree with themselves: the sign-flip p-value and its CI from the same test,
Holm families with each CI at its Holm step (`stats.corrections`), `lose` with two systems.

Independent code: scipy's exact permutation test (the p-value, and the CI ends re-tested) and
a textbook Holm written here.
"""

from __future__ import annotations

import numpy as np
import pytest

from retrieval_bench.stats.corrections import family_tests, holm_levels
from retrieval_bench.stats.paired import paired_test
from retrieval_bench.stats.settings import SignificanceSettings
from retrieval_bench.stats.verdicts import (
    LOSE,
    TIE,
    WIN,
    delta_families,
    family_key,
    verdict_cell,
    verdict_cells,
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


def _on(prefix: str, values: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """The same values on other queries (`prefix`-q00, ...): another group's test."""
    return {label: {f"{prefix}-{q}": v for q, v in per.items()} for label, per in values.items()}


def test_family_table_makes_the_reported_contradiction_agree() -> None:
    # Two types whose queries give the same values: two tests of one table family.
    cells = {("recall@K", t): _on(t, _values({"A": A, "B": B})) for t in ("fact", "list")}
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


def test_a_type_and_all_on_a_set_of_one_type_are_one_test() -> None:
    # One query type: its row and `all` hold the same queries, so they are the same test. It
    # enters the family once (m = 2 with another metric's, not 4) and both rows show it alike.
    same = _values({"A": A, "B": B})
    other = _on("x", _values({"A": A + 0.05, "B": B}))
    cells = {
        ("recall@K", "fact"): same,
        ("recall@K", "all"): same,
        ("ndcg@K", "fact"): other,
        ("ndcg@K", "all"): other,
    }
    cells_out = verdict_cells(cells, SIG, family_of=family_key("table"), family_name="table")
    p = 66 / 2048
    p_other = cells_out[("ndcg@K", "fact")].tests["B"]["p_value"]
    for metric in ("recall@K", "ndcg@K"):
        fact, every = cells_out[(metric, "fact")], cells_out[(metric, "all")]
        assert fact.to_json() == every.to_json()
        assert fact.tests["B"]["power"]["alpha_test"] == 0.05 / 2
    holm = textbook_holm([p, p_other])
    assert cells_out[("recall@K", "all")].tests["B"]["p_holm"] == holm[0]
    # The ablation and robustness tables: the same rule.
    deltas = delta_families(
        {(m, t): (v["B"], {"A": v["A"]}) for (m, t), v in cells.items()},
        SIG,
        family_of=family_key("table"),
        family_name="table",
    )
    for metric in ("recall@K", "ndcg@K"):
        [fact], [every] = deltas[(metric, "fact")], deltas[(metric, "all")]
        assert fact.to_json() == every.to_json()
        assert fact.power["alpha_test"] == 0.05 / 2
    assert deltas[("recall@K", "all")][0].p_adjusted == holm[0]
    # Among many configurations (tiers): each pair once.
    from retrieval_bench.stats.tiers import tier_cells

    three = {**same, "C": {q: v / 2 for q, v in same["B"].items()}}
    tiers = tier_cells({("recall@K", "fact"): three, ("recall@K", "all"): three}, SIG,
                       family_of=family_key("table"), rank_resamples=200)  # fmt: skip
    assert tiers[("recall@K", "fact")].to_json() == tiers[("recall@K", "all")].to_json()
    alone = tier_cells({("recall@K", "fact"): three}, SIG, rank_resamples=200)
    assert tiers[("recall@K", "all")].to_json() == alone[("recall@K", "fact")].to_json()


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


# --- (c) two systems: the loser loses -----------------------------------------------------


def test_two_systems_loser_is_lose_three_have_a_second() -> None:
    n = 12
    two = verdict_cell(_values({"A": np.ones(n), "B": np.zeros(n)}), SIG)
    assert two.verdicts == {"A": WIN, "B": LOSE}
    three = verdict_cell(_values({"A": np.ones(n), "B": np.full(n, 0.5), "C": np.zeros(n)}), SIG)
    assert three.verdicts == {"A": WIN, "B": "second", "C": LOSE}
