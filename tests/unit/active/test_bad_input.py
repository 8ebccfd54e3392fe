"""Issue #41's bad input, one fast in-process test each, on plans written by hand (the whole
flow on real jobs is tests/unit/active/test_plan.py, slow): a budget larger than the pool, zero
or negative; a plan file edited so that its probabilities no longer match; a round's pool file
edited; labels returned for items the plan did not choose (a warning: the estimate stays
valid); a round issued, or an estimate made, before the previous round's labels came back."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from retrieval_bench.active.context import PlanError
from retrieval_bench.active.estimate import outside_labels
from retrieval_bench.active.plan import (
    VERSION,
    PlanSettings,
    _round_hash,
    _uniforms,
    check_pool_file,
    read_plan,
    require_labels_back,
)
from retrieval_bench.errors import ConfigError
from run.label import main as label_main

QUERIES = [f"q{i}" for i in range(12)]


def _plan(seed: int = 4) -> dict[str, Any]:
    """A one-round plan over 12 queries as `run.label plan` records it: probabilities 0.5, the
    chosen queries drawn from the seed, the round hashed; q0 and q1 open with two pairs each."""
    pi = {q: 0.5 for q in QUERIES}
    draws = _uniforms(seed, 1, len(QUERIES))
    chosen = [q for q, u in zip(QUERIES, draws.tolist(), strict=True) if u < pi[q]]
    record: dict[str, Any] = {"round": 1, "pi": pi, "chosen": chosen, "weights": None}
    record["sha256"] = _round_hash(record)
    return {
        "version": VERSION,
        "seed": seed,
        "queries": QUERIES,
        "certain": [],
        "open": {q: [f"{q}-p1", f"{q}-p2"] for q in QUERIES},
        "rounds": [record],
    }


def _write(folder: Path, plan: dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    return folder


def _context(people: dict[str, dict[str, int]]) -> SimpleNamespace:
    """What the checks read of a plan's context: its queries with people's labels."""
    queries = [SimpleNamespace(query_id=q, people_relevance=people.get(q, {})) for q in QUERIES]
    return SimpleNamespace(queries=queries, labels=Path("snapshot.jsonl"))


@pytest.mark.parametrize(
    ("budget", "message"),
    [(0, "must be a positive"), (-3, "must be a positive"), (13, "only 12")],
)
def test_a_budget_of_zero_negative_or_above_the_pool_is_refused_naming_the_flag(
    budget: int, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        PlanSettings(budget=budget).check(candidates=12)
    assert info.value.key == "--budget"
    PlanSettings(budget=12).check(candidates=12)  # the whole pool is allowed


def test_simulation_budgets_must_be_positive(capsys: pytest.CaptureFixture[str]) -> None:
    for budgets in ("0,30", "-5", "ten"):
        with pytest.raises(SystemExit) as info:
            label_main(["simulate", "x", "--budgets", budgets, "--judge", "similarity"])
        assert info.value.code == 2
        assert "--budgets" in capsys.readouterr().err


def test_a_plan_edited_after_its_draw_exits_2_naming_the_round(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = _plan()
    assert read_plan(_write(tmp_path / "ok", plan))["rounds"][0]["chosen"]
    # A probability changed by hand: the round's hash no longer matches.
    edited = _plan()
    edited["rounds"][0]["pi"]["q3"] = 0.9
    folder = _write(tmp_path / "edited", edited)
    assert label_main(["estimate", str(folder), "--labels", str(tmp_path / "none.jsonl")]) == 2
    assert "round 1 was edited after it was drawn" in capsys.readouterr().err
    # ... and re-hashed too: the seed no longer draws the chosen queries from them.
    edited["rounds"][0]["pi"] = {q: 0.01 for q in QUERIES}
    edited["rounds"][0]["sha256"] = _round_hash(edited["rounds"][0])
    with pytest.raises(PlanError, match="not what its seed and probabilities draw"):
        read_plan(_write(tmp_path / "rehashed", edited))
    # A chosen query added by hand, re-hashed.
    added = _plan()
    missing = next(q for q in QUERIES if q not in added["rounds"][0]["chosen"])
    added["rounds"][0]["chosen"].append(missing)
    added["rounds"][0]["sha256"] = _round_hash(added["rounds"][0])
    with pytest.raises(PlanError, match="not what its seed"):
        read_plan(_write(tmp_path / "added", added))


def test_a_round_s_pool_file_whose_probabilities_differ_is_refused_at_its_line(
    tmp_path: Path,
) -> None:
    plan = _plan()
    record = plan["rounds"][0]
    chosen = record["chosen"][0]
    pool = tmp_path / "round-1" / "pool.jsonl"
    pool.parent.mkdir()
    rows = [
        {"query_id": chosen, "id": f"{chosen}-p1", "inclusion_probability": 0.5},
        {"query_id": chosen, "id": f"{chosen}-p2", "inclusion_probability": 0.5},
    ]
    pool.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    check_pool_file(tmp_path, plan, record)  # as drawn
    rows[1]["inclusion_probability"] = 0.25
    pool.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(PlanError, match=r"pool.jsonl:2: inclusion_probability 0.25"):
        check_pool_file(tmp_path, plan, record)
    other = next(q for q in QUERIES if q not in record["chosen"])
    rows[1] = {"query_id": other, "id": f"{other}-p1", "inclusion_probability": 0.5}
    pool.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(PlanError, match=f"pool.jsonl:2: query '{other}' is not one round 1"):
        check_pool_file(tmp_path, plan, record)


def test_labels_for_queries_the_plan_did_not_choose_are_counted_to_be_ignored() -> None:
    plan = _plan()
    chosen = plan["rounds"][0]["chosen"]
    other = next(q for q in QUERIES if q not in chosen)
    people = {q: {f"{q}-p1": 1, f"{q}-p2": 0} for q in chosen}
    people[other] = {f"{other}-p2": 1, "elsewhere": 1}  # one open pair; one never pooled
    assert outside_labels(plan, _context(people)) == {other: 1}
    assert outside_labels(plan, _context({q: people[q] for q in chosen})) == {}


def test_a_round_before_the_previous_round_s_labels_came_back_is_refused() -> None:
    plan = _plan()
    chosen = plan["rounds"][0]["chosen"]
    people = {q: {f"{q}-p1": 1, f"{q}-p2": 0} for q in chosen}
    require_labels_back(plan, _context(people), plan["rounds"], "draw the next round")
    people[chosen[0]] = {f"{chosen[0]}-p1": 1}  # one pair not back yet
    with pytest.raises(PlanError) as info:
        require_labels_back(plan, _context(people), plan["rounds"], "draw the next round")
    message = str(info.value)
    assert "snapshot.jsonl: 1 pairs of 1 queries" in message
    assert f"{chosen[0]}-p2" in message and message.endswith("then draw the next round")
