"""The Pareto front of quality against a cost (`stats.pareto`) on hand-worked cases."""

from __future__ import annotations

from retrieval_bench.stats.pareto import pareto_front


def test_pareto_front_against_a_hand_worked_case() -> None:
    """Costs c=1, b=5, a=10, d=20; significantly: a beats c and d, b beats c. Cheapest first:
    c joins the front; b beats c, so it joins; a does not beat b (cheaper), so b dominates it;
    d beats neither c nor b. e (no cost) is unmeasured."""
    beats = {("a", "c"), ("a", "d"), ("b", "c")}
    front = pareto_front({"a": 10, "b": 5, "c": 1, "d": 20, "e": None}, beats)
    assert front == {
        "front": ["c", "b"],
        "dominated_by": {"a": ["b"], "d": ["c", "b"]},
        "unmeasured": ["e"],
    }
    # One cost: only a significant difference dominates.
    assert pareto_front({"a": 5, "b": 5}, beats)["front"] == ["a", "b"]
    assert pareto_front({"a": 5, "b": 5}, {("b", "a")}) == {
        "front": ["b"],
        "dominated_by": {"a": ["b"]},
        "unmeasured": [],
    }


def test_only_front_members_dominate() -> None:
    """Non-transitive: hybrid beats flat, dense beats nothing, hybrid does not beat dense.
    dense (cheaper than hybrid, not worse) would knock hybrid out, and flat would knock dense
    out; but dense is off the front, so hybrid, significantly better than the only cheaper front
    member, stays."""
    front = pareto_front({"flat": 1.0, "dense": 2.0, "hybrid": 3.0}, {("hybrid", "flat")})
    assert front["front"] == ["flat", "hybrid"]
    assert front["dominated_by"] == {"dense": ["flat"]}


def test_a_zero_cost_and_configurations_of_equal_cost() -> None:
    """A cost of 0 is a cost (the cheapest), not a missing one; configurations of equal cost
    are taken together, so one does not knock out another it is not worse than: `free` joins
    first; at cost 2, `x` beats `free` and stays, `y` does not and is dominated; at cost 3, `u`
    and `v` (equal, neither beats x nor the other) are both dominated by the front."""
    beats = {("x", "free"), ("u", "free"), ("v", "free")}
    front = pareto_front({"u": 3.0, "free": 0.0, "x": 2.0, "y": 2.0, "v": 3.0}, beats)
    assert front == {
        "front": ["free", "x"],
        "dominated_by": {"y": ["free"], "u": ["x"], "v": ["x"]},
        "unmeasured": [],
    }
    # Two free configurations, neither better: both on the front.
    assert pareto_front({"a": 0.0, "b": 0.0}, set())["front"] == ["a", "b"]
