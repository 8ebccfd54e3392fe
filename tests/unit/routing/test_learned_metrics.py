"""metrics.json's `learned_router` on hand-built per-query values: the held-out table against
RRF, the rules, the best single candidate and the oracle with `captured`, the routing
confusion, the departures from the rules and the tests against each comparison."""

from __future__ import annotations

from typing import Any

import pytest

from retrieval_bench.records import EvalQuery, FilterDecision, ParsedQuery, QueryRecord, StageRecord
from retrieval_bench.routing.learned_metrics import LearnedOutcome, learned_metrics
from retrieval_bench.stats.settings import SignificanceSettings

# Candidates A and B (hybrid is the comparison RRF, rules the rules router's choice), metric m.
#   q1 (X): A 1, B 0, learned chose A (1); rules chose B.
#   q2 (X): A 0, B 1, learned chose A (0); rules chose B.
#   q3 (Y): A .5, B 1, learned chose B (1); rules chose B.
#   q4 (Y): A 1, B .5, learned chose A (1); rules chose A.
# Means: A .625, B .625 -> best single A (the first on a tie). Oracle (1, 1, 1, 1) = 1.
# learned .75 -> captured (.75 - .625) / (1 - .625) = 1/3.
VALUES = {
    "A": {"q1": 1.0, "q2": 0.0, "q3": 0.5, "q4": 1.0},
    "B": {"q1": 0.0, "q2": 1.0, "q3": 1.0, "q4": 0.5},
    "hybrid": {"q1": 0.5, "q2": 0.5, "q3": 0.5, "q4": 0.5},
}
CHOSEN = {"q1": "A", "q2": "A", "q3": "B", "q4": "A"}
RULES = {"q1": "B", "q2": "B", "q3": "B", "q4": "A"}
TYPE = {"q1": "X", "q2": "X", "q3": "Y", "q4": "Y"}


def per_query(values: dict[str, float]) -> dict[str, dict[str, Any]]:
    return {q: {"query_type": TYPE[q], "m": v} for q, v in values.items()}


def stage(system: str) -> StageRecord:
    return StageRecord(ids=[system], scores=[1.0], pool_requested=1, pool_returned=1)


def test_the_table_the_confusion_and_the_departures_by_hand() -> None:
    learned = {q: VALUES[CHOSEN[q]][q] for q in TYPE}
    rules = {q: VALUES[RULES[q]][q] for q in TYPE}
    metrics = {
        "stages": {"final": {"per_query": per_query(learned), "by_type": {"X": {}, "Y": {}}}},
        "baselines": {
            name: {"per_query": per_query(v)} for name, v in {**VALUES, "rules": rules}.items()
        },
    }
    records = [
        QueryRecord(
            EvalQuery(query_id=q, query=q, query_type=TYPE[q], label_status="reviewed"),
            CHOSEN[q],
            CHOSEN[q],
            ParsedQuery(),
            FilterDecision(None),
            baselines={"A": stage("a"), "B": stage("b"), "rules": stage(RULES[q].lower())},
        )
        for q in TYPE
    ]
    outcome = LearnedOutcome(
        mode="hard",
        metric="m",
        candidates=["A", "B"],
        features=["f"],
        model=None,
        applied=None,
        chosen=CHOSEN,
        rules=RULES,
    )
    settings = SignificanceSettings(n_resamples=200)
    got = learned_metrics(records, outcome, metrics, 2, 0, settings, min_queries=1)
    overall = got["table"]["overall"]
    assert overall["learned"] == 0.75 and overall["rrf"] == 0.5 and overall["rules"] == 0.75
    assert (overall["best_single"], overall["best_single_name"]) == (0.625, "A")
    assert overall["oracle"] == 1.0
    assert overall["captured"] == pytest.approx(1 / 3)
    assert got["table"]["by_type"]["X"]["learned"] == 0.5
    assert got["choices"] == {
        "by_type": {"X": {"A": 2}, "Y": {"A": 1, "B": 1}},
        "overall": {"A": 3, "B": 1},
    }
    # q1 and q2 ranked otherwise than the rules (A's list against B's): better, then worse.
    departures = got["departures"]
    assert (departures["n"], departures["better"], departures["worse"]) == (2, 1, 1)
    assert {q["query_id"] for q in departures["queries"]} == {"q1", "q2"}
    assert set(got["tests"]) == {"rrf", "rules", "best_single", "correction", "family"}
    assert got["tests"]["rrf"]["all"]["diff"] == pytest.approx(0.25)
    assert got["estimate"] == "held_out" and got["fallback"] == {"n": 0, "queries": {}}
