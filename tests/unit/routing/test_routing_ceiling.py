"""The routing ceiling: oracle, cross-validated fixed strategy per type and the captured share on
hand-built per-query values; fold assignment; the evalset-tuned settings; and the ceiling in a
router job's metrics.json and report.md."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURE, ROOT, run_in_process
from omegaconf import OmegaConf

from retrieval_bench.config import BUILTIN_ARMS
from retrieval_bench.config.router import RouterConfig
from retrieval_bench.errors import ConfigError
from retrieval_bench.reports.router import ceiling_section, settings_lines
from retrieval_bench.routing.ceiling import assign_folds, cross_validated_choice, routing_ceiling
from retrieval_bench.routing.rules import load_rule_set

# Two types, the routed system and two baselines A and B, one metric "m". By hand:
#   overall means: A 3/7, B 3.5/7 -> best single B.
#   X: routed 2/4, B 1.5/4, oracle (1, 1, .5, .5) 3/4 -> captured (.5-.375)/(.75-.375) = 1/3.
#   Y: routed 2/3, B 2/3, oracle 1 -> captured 0.
#   all: routed 4/7, B 3.5/7, oracle 6/7 -> captured (.5/7)/(2.5/7) = 0.2.
# Leave-one-out (4 folds cover both types; ties go to A, the first candidate):
#   X without x1: A 1/3, B 1/2 -> B, B(x1)=0;  without x2: A 2/3, B 1/6 -> A, A(x2)=0;
#     without x3: A 1/2 = B 1/2 -> A, A(x3)=.5;  without x4: A 1/2, B 1/3 -> A, A(x4)=.5.
#     CV-fixed X = 1/4 (choosing on all of X would pick A: 2/4).
#   Y without y1: A 1/2 = B 1/2 -> A, A(y1)=0; without y2: A 0, B 1 -> B, B(y2)=0;
#     without y3: tie -> A, A(y3)=0. CV-fixed Y = 0. All: 1/7.
VALUES = {
    "routed": {"x1": 1, "x2": 0.5, "x3": 0.5, "x4": 0, "y1": 1, "y2": 1, "y3": 0},
    "A": {"x1": 1, "x2": 0, "x3": 0.5, "x4": 0.5, "y1": 0, "y2": 1, "y3": 0},
    "B": {"x1": 0, "x2": 1, "x3": 0, "x4": 0.5, "y1": 1, "y2": 0, "y3": 1},
}


def per_query(values: dict[str, dict[str, float]]) -> dict[str, dict[str, dict[str, Any]]]:
    return {
        system: {q: {"query_type": q[0].upper(), "m": v} for q, v in by_query.items()}
        for system, by_query in values.items()
    }


def ceiling(folds: int = 4, seed: int = 0, **kwargs: Any) -> dict[str, Any]:
    return routing_ceiling(per_query(VALUES), "routed", ["m"], folds, seed, **kwargs)


def test_oracle_best_single_and_captured_share_by_hand() -> None:
    result = ceiling()
    assert result["candidates"] == ["A", "B"]
    assert result["best_single"] == {"m": "B"}
    x, y, overall = result["by_type"]["X"]["m"], result["by_type"]["Y"]["m"], result["overall"]["m"]
    assert (x["routed"], x["best_single"], x["oracle"]) == (0.5, 0.375, 0.75)
    assert x["captured"] == pytest.approx(1 / 3, abs=1e-15)
    assert (y["routed"], y["best_single"], y["oracle"]) == pytest.approx((2 / 3, 2 / 3, 1.0))
    assert y["captured"] == 0.0
    assert (overall["routed"], overall["best_single"], overall["oracle"]) == pytest.approx(
        (4 / 7, 3.5 / 7, 6 / 7)
    )
    assert overall["captured"] == pytest.approx(0.2, abs=1e-15)
    assert result["overall"]["n"] == 7 and x["undefined"] == {} == y["undefined"]


def test_cross_validated_fixed_strategy_by_hand() -> None:
    result = ceiling()
    x, y = result["by_type"]["X"], result["by_type"]["Y"]
    assert x["m"]["cv_fixed"] == 0.25
    assert Counter(x["m"]["cv_choices"]) == {"A": 3, "B": 1}
    assert y["m"]["cv_fixed"] == 0.0
    assert Counter(y["m"]["cv_choices"]) == {"A": 2, "B": 1}
    assert result["overall"]["m"]["cv_fixed"] == pytest.approx(1 / 7, abs=1e-15)
    # X fills the 4 folds; Y has 3 queries and says so.
    assert (x["folds"], x["note"]) == (4, None)
    assert y["folds"] == 3
    assert y["note"] == "3 queries, fewer than the 4 folds: leave-one-out (3 folds)"


def test_the_choice_never_sees_the_held_out_fold() -> None:
    """Each fold's training queries favour the strategy that is worse on its held-out query, so
    any leak of the held-out fold into the choice would change the values."""
    values = {"A": {"q1": 1.0, "q2": 1.0, "q3": 0.0}, "B": {"q1": 0.6, "q2": 0.6, "q3": 1.0}}
    # Without q1: A 1/2, B 4/5 -> B (0.6); without q2: the same (0.6); without q3: A 1, B .6
    # -> A (0). Choosing on all queries would give B everywhere (mean 11/15); choosing on the
    # held-out query itself would give the per-query best (mean 1).
    held_out, choices = cross_validated_choice(values, ["A", "B"], {"q1": 0, "q2": 1, "q3": 2})
    assert held_out == {"q1": 0.6, "q2": 0.6, "q3": 0.0}
    assert choices == ["B", "B", "A"]


def test_captured_share_is_undefined_when_no_query_has_a_better_strategy() -> None:
    values = {
        "routed": {"x1": 0.0, "x2": 1.0},
        "A": {"x1": 1.0, "x2": 1.0},
        "B": {"x1": 0.0, "x2": 0.5},
    }
    result = routing_ceiling(per_query(values), "routed", ["m"], 2, 0)
    cell = result["by_type"]["X"]["m"]
    assert (cell["routed"], cell["best_single"], cell["oracle"]) == (0.5, 1.0, 1.0)
    assert cell["captured"] is None
    assert cell["undefined"]["captured"] == (
        "oracle = best single (A) on every query: no strategy does better on any of them, "
        "so there is no gain to capture"
    )


def test_a_type_with_one_query_or_none() -> None:
    values = {s: {**v, "z1": 0.5} for s, v in VALUES.items()}
    result = routing_ceiling(per_query(values), "routed", ["m"], 4, 0, types=["E", "X", "Z"])
    z, empty = result["by_type"]["Z"], result["by_type"]["E"]
    assert z["note"] == "1 query: no training queries to choose a fixed strategy on"
    assert z["m"]["cv_fixed"] is None and z["m"]["undefined"]["cv_fixed"] == z["note"]
    assert result["overall"]["m"]["cv_fixed"] is None
    assert result["overall"]["m"]["undefined"]["cv_fixed"] == "undefined for type(s) Z"
    assert empty["n"] == 0 and empty["m"]["oracle"] is None
    assert empty["m"]["undefined"]["oracle"] == "no scored queries"


def test_folds_are_seeded_and_stratified_by_type() -> None:
    types = {f"q{i:02d}": "XYZ"[i % 3] for i in range(23)}
    folds = assign_folds(types, 5, seed=7)
    assert folds == assign_folds(dict(reversed(types.items())), 5, seed=7)  # order-free
    assert folds != assign_folds(types, 5, seed=8)
    for qtype in "XYZ":
        sizes = Counter(f for q, f in folds.items() if types[q] == qtype)
        assert set(sizes) == set(range(5))
        assert max(sizes.values()) - min(sizes.values()) <= 1
    # The same seed gives the same folds, hence the same result.
    assert ceiling(folds=2, seed=3) == ceiling(folds=2, seed=3)


def test_folds_below_two_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        assign_folds({"q": "X"}, 1, 0)


def rules(**overrides: Any) -> RouterConfig:
    cfg = OmegaConf.merge(
        OmegaConf.structured(RouterConfig), OmegaConf.load(ROOT / "conf" / "router" / "rules.yaml")
    )
    for key, value in overrides.items():
        OmegaConf.update(cfg, key, value, merge=False)
    result = OmegaConf.to_object(cfg)
    assert isinstance(result, RouterConfig)
    return result


def test_tuned_settings_are_read_and_typos_refused() -> None:
    loaded = load_rule_set(
        rules(tuned_on_evalset=["short_query_length", "negation.max_gap"]), tuple(BUILTIN_ARMS)
    )
    assert loaded is not None
    assert loaded.tuned == {"short_query_length": 12, "negation.max_gap": 4}
    with pytest.raises(ConfigError) as error:
        load_rule_set(rules(tuned_on_evalset=["negation.max_gapp"]), tuple(BUILTIN_ARMS))
    assert str(error.value) == (
        "config key 'router.tuned_on_evalset[0]': unknown router key 'negation.max_gapp'; "
        "did you mean 'negation.max_gap'?"
    )
    with pytest.raises(ConfigError, match=r"'router\.ceiling_folds': must be at least 2, got 1"):
        load_rule_set(rules(ceiling_folds=1), tuple(BUILTIN_ARMS))


def test_settings_lines_say_which_numbers_are_optimistic() -> None:
    settings = {
        "thresholds": {"short_query_length": 12, "negation.max_gap": 4},
        "tuned_on_evalset": {"short_query_length": 12},
    }
    assert settings_lines(settings) == [
        "These settings were chosen on this evaluation set: `short_query_length`=12; the "
        "numbers for the rules router are optimistic (fitted on the queries they are scored "
        "on).",
        "Thresholds in use, not declared tuned on this evaluation set "
        "(`router.tuned_on_evalset`) and not validated on held-out data: `negation.max_gap`=4.",
        "",
    ]


def test_report_table_and_notes() -> None:
    text = "\n".join(ceiling_section(ceiling()))
    assert "| X | 4 | 0.500 | 0.375 | 0.250 | 0.750 | 0.333 | A ×3, B ×1 |" in text
    assert "| all | 7 | 0.571 | 0.500 | 0.143 | 0.857 | 0.200 | per type |" in text
    assert "- Y: 3 queries, fewer than the 4 folds: leave-one-out (3 folds)." in text


def run_mini(tmp_path: Path, *overrides: str) -> Path:
    """A router=rules job on the fixture, in-process, its files under tmp_path / "run"."""
    overrides = (
        "router=rules",
        "dataset.name=mini",
        f"dataset.corpus={FIXTURE / 'corpus' / 'mini'}",
        f"dataset.evalset={FIXTURE / 'evalsets' / 'mini.jsonl'}",
        f"cache_dir={tmp_path / 'cache'}",
        *overrides,
    )
    return run_in_process(overrides, tmp_path)[1]


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_router_job_reports_its_ceiling(tmp_path: Path) -> None:
    job = run_mini(tmp_path, "router.tuned_on_evalset=[short_query_length]")
    metrics = json.loads((job / "metrics.json").read_text())
    k = metrics["cutoffs"][0]
    result = metrics["router"]["ceiling"]
    final, baselines = metrics["stages"]["final"], metrics["baselines"]
    assert result["candidates"] == ["bm25", "dense", "hybrid"]
    assert result["metrics"] == [f"recall@{k}", f"ndcg@{k}", f"hit@{k}", f"mrr@{k}"]
    systems = {"routed": final, **baselines}
    for metric in result["metrics"]:
        cell = result["overall"][metric]
        best = result["best_single"][metric]
        assert cell["routed"] == pytest.approx(final["overall"][metric])
        assert cell["best_single"] == pytest.approx(baselines[best]["overall"][metric])
        # The oracle traces to the per-query records of metrics.json.
        per_query = [
            max(s["per_query"][q][metric] for s in systems.values()) for q in final["per_query"]
        ]
        assert cell["oracle"] == pytest.approx(sum(per_query) / len(per_query))
    assert result["overall"]["n"] == final["counts"]["scored"]
    # The fixture has 2 scored entity_exact queries (m09 is excluded), 1 of each other type.
    assert result["by_type"]["entity_exact"]["note"] == (
        "2 queries, fewer than the 5 folds: leave-one-out (2 folds)"
    )
    assert result["by_type"]["negation"]["note"] == (
        "1 query: no training queries to choose a fixed strategy on"
    )
    assert result["overall"][f"ndcg@{k}"]["undefined"]["cv_fixed"] == (
        "undefined for type(s) constraint_dense, fuzzy_intent, multi_hop, negation"
    )
    assert metrics["router"]["settings"] == {
        "thresholds": {"short_query_length": 12, "negation.max_gap": 4},
        "tuned_on_evalset": {"short_query_length": 12},
    }
    report = (job / "report.md").read_text()
    assert "### The routing ceiling: how much could routing gain?" in report
    assert "These settings were chosen on this evaluation set: `short_query_length`=12" in report
