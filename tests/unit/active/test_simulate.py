"""`active.simulate` on a small synthetic comparison: every strategy and estimator is measured,
the intervals cover at about their level, the active plan is narrower than uniform where the
judge knows something, and the queries-needed interpolation is checked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval_bench.active.calibration import cells, score_ranks
from retrieval_bench.active.compared import Compared
from retrieval_bench.active.simulate import (
    DIFFERENCE,
    ONE_ROUND,
    Case,
    Settings,
    _interpolate,
    full_verdict,
    labels_needed,
    simulate,
)
from retrieval_bench.active.strategies import STRATEGIES


def _case(n: int = 150, seed: int = 0) -> Case:
    """System a ranks the relevant passage first on 70% of the queries, b on 55%; on 60% of the
    queries both rank alike. The judge's score is the truth blurred."""
    rng = np.random.default_rng(seed)
    tops: dict[str, dict[str, list[str]]] = {"a": {}, "b": {}}
    labels = []
    for i in range(n):
        rel, others = f"q{i}-rel", [f"q{i}-x{j}" for j in range(4)]
        a_first = rng.random() < 0.7
        same = rng.random() < 0.6
        a = [rel, *others[:2]] if a_first else [others[0], rel, others[1]]
        b = (
            list(a)
            if same
            else ([rel, others[2], others[3]] if rng.random() < 0.55 else others[1:4])
        )
        tops["a"][f"q{i}"], tops["b"][f"q{i}"] = a, b
        labels.append({rel: 1})
    qids = [f"q{i}" for i in range(n)]
    compared = Compared.build(qids, ["t"] * n, tops, depth=3)
    codes, grades = compared.label_layout(labels)
    truth = compared.values("ndcg", 3, codes, grades)
    pair_ids = compared.pair_ids()
    relevant = np.array([1.0 if pid.endswith("-rel") else 0.0 for _, pid in pair_ids])
    score = relevant + rng.normal(0, 0.6, len(relevant))
    pair_cell = cells(np.zeros(len(score), dtype=int), score_ranks(compared.pair_query, score),
                      compared.best_ranks())  # fmt: skip
    return Case("synthetic", compared, "ndcg", 3, truth, relevant, None, pair_cell)


def test_every_strategy_is_measured_and_covers() -> None:
    case = _case()
    settings = Settings(budgets=[30, 60], first_rounds=30, second_draws=10, mc_draws=8, seed=1)
    result = simulate(case, settings)
    rows = result["rows"]
    assert {(r["strategy"], r["estimator"]) for r in rows} == {
        (s, e) for s in STRATEGIES for e in ("people", "ppi")
    } | {(ONE_ROUND, "people")}
    assert {r["quantity"] for r in rows} == {DIFFERENCE, "a", "b"}
    difference = [r for r in rows if r["quantity"] == DIFFERENCE]
    for r in difference:
        assert r["draws"] == 300 and r["undefined"] == 0
        assert 0.85 <= r["coverage"] <= 1.0, r
        assert abs(r["labelled"] - r["budget"]) < 0.1 * r["budget"], r
        assert 0 <= r["agreement"] <= 1
    width = {(r["strategy"], r["estimator"], r["budget"]): r["width"] for r in difference}
    assert width[("active", "ppi", 60)] < width[("uniform", "people", 60)]
    # The reference, one uniform round: as wide as the two-round uniform plan, within noise.
    assert width[(ONE_ROUND, "people", 60)] == pytest.approx(
        width[("uniform", "people", 60)], rel=0.1
    )
    assert result["truth"][DIFFERENCE] == pytest.approx(float(case.quantities()[DIFFERENCE].mean()))


def test_queries_needed_interpolate_log_log_by_hand() -> None:
    # width 0.2 at 20 queries, 0.1 at 80: width ~ n^-1/2, so 0.1414 is reached at 40.
    assert _interpolate([(20.0, 0.2), (80.0, 0.1)], 0.2 / np.sqrt(2)) == pytest.approx(40.0)
    assert _interpolate([(20.0, 0.2), (80.0, 0.1)], 0.3) is None
    result = {
        "rows": [
            {"quantity": DIFFERENCE, "strategy": s, "estimator": "people", "budget": b,
             "labelled": float(b), "width": w}
            for s, b, w in [("uniform", 20, 0.2), ("uniform", 80, 0.1),
                            ("active", 20, 0.1), ("active", 80, 0.05)]
        ]
    }  # fmt: skip
    needed = {(r["budget"], r["strategy"]): r for r in labels_needed(result)}
    assert needed[(80, "active")]["needed"] == pytest.approx(20.0)
    assert needed[(80, "active")]["saving"] == pytest.approx(0.75)
    assert needed[(20, "active")]["needed"] is None  # below what was simulated


def test_the_full_label_verdict_is_the_normal_interval_over_every_query() -> None:
    assert full_verdict(np.array([0.1, 0.2, 0.15, 0.12]), ["a", "b"], 0.95) == "a"
    assert full_verdict(np.array([-0.1, -0.2, -0.15, -0.12]), ["a", "b"], 0.95) == "b"
    assert full_verdict(np.array([0.1, -0.1, 0.05, -0.05]), ["a", "b"], 0.95) == "tie"
