"""Tiers among many systems (`stats.tiers`), against cases worked by hand.

The hand case: 8 queries, so the sign-flip test is exact (2^8 = 256 patterns <= 10,000).
A scores 1 on every query, B 0, C 1 on the first four and 0 on the rest.

* A - B = 1 on all 8: only the all-plus pattern (and its mirror) is as extreme, p = 2/256.
* A - C and C - B = 1 on 4 queries, 0 on 4: the four zeros' signs do not matter, the four
  ones must all be +: 16 patterns of 256 on each side, p = 2 * 16/256 = 0.125.
* Holm over the cell's 3 tests: 3 * 2/256 = 0.0234375 < 0.05; then 2 * 0.125 = 0.25 (and
  max(0.25, 0.125) = 0.25 for the last). So A beats B and nothing else is significant.
* Tiers: A and C are beaten by nobody -> tier 1; B (beaten by A) -> tier 2. B is not
  separated from C, which sits a tier above it: the non-transitive case, named.
"""

from __future__ import annotations

import pytest

from retrieval_bench.stats.settings import SignificanceSettings
from retrieval_bench.stats.tiers import peel_tiers, tier_cells

SIG = SignificanceSettings(alpha=0.05, n_resamples=10_000, seed=0)
A = [1.0] * 8
B = [0.0] * 8
C = [1.0] * 4 + [0.0] * 4


def _cell(values: dict[str, list[float]], group: str = "") -> dict[str, dict[str, float]]:
    """`group`: another group's queries (`group`-q0, ...) with the same values."""
    return {label: {f"{group}q{i}": v for i, v in enumerate(vs)} for label, vs in values.items()}


def test_the_hand_worked_cell() -> None:
    cell = tier_cells({"t": _cell({"B": B, "C": C, "A": A})}, SIG)["t"]
    tests = {(t["a"], t["b"]): t for t in cell.tests}
    assert set(tests) == {("A", "C"), ("A", "B"), ("C", "B")}  # every pair, best mean first
    assert tests[("A", "B")]["p_value"] == pytest.approx(2 / 256)
    assert tests[("A", "C")]["p_value"] == pytest.approx(0.125)
    assert tests[("C", "B")]["p_value"] == pytest.approx(0.125)
    assert tests[("A", "B")]["p_adjusted"] == pytest.approx(3 * 2 / 256)
    assert tests[("A", "C")]["p_adjusted"] == pytest.approx(0.25)
    assert tests[("C", "B")]["p_adjusted"] == pytest.approx(0.25)
    assert [t["better"] for t in (tests[("A", "B")], tests[("A", "C")])] == ["A", None]
    assert cell.tiers == [["A", "C"], ["B"]]
    assert cell.beaten_by == {"A": [], "C": [], "B": ["A"]}
    assert cell.unseparated_above == {"B": ["C"]}
    assert cell.note == "2 tiers; first: A, C"


def test_bh_gives_the_hand_worked_adjustment() -> None:
    """BH step-up over (2/256, 0.125, 0.125): 3 * 0.125 / 3 = 0.125 for the two largest,
    min(0.125, 3 * (2/256) / 1) = 0.0234375 for the smallest: the same tiers."""
    settings = SignificanceSettings(alpha=0.05, n_resamples=10_000, seed=0, correction="bh")
    cell = tier_cells({"t": _cell({"A": A, "B": B, "C": C})}, settings)["t"]
    adjusted = sorted(t["p_adjusted"] for t in cell.tests)
    assert adjusted == pytest.approx([3 * 2 / 256, 0.125, 0.125])
    assert cell.tiers == [["A", "C"], ["B"]]


def test_the_correction_spans_the_types_of_a_family() -> None:
    """The same values under two types (on their own queries), one family: Holm over 6 tests,
    6 * 2/256 = 0.046875 < 0.05 (still significant). Under three types, 9 * 2/256 = 0.0703 >
    0.05: no configuration beats another, one tier, and the cell says why none could (n = 8 is
    too few for 9 tests)."""
    columns = {"A": A, "B": B, "C": C}
    two = tier_cells(
        {("m", t): _cell(columns, t) for t in ("t1", "t2")}, SIG, family_of=lambda k: k[0]
    )
    for cell in two.values():
        ab = next(t for t in cell.tests if (t["a"], t["b"]) == ("A", "B"))
        assert ab["p_adjusted"] == pytest.approx(6 * 2 / 256)
        assert cell.tiers == [["A", "C"], ["B"]]
    keys = [("m", f"t{i}") for i in range(3)]
    three = tier_cells({k: _cell(columns, k[1]) for k in keys}, SIG, family_of=lambda k: k[0])
    for cell in three.values():
        assert cell.tiers == []
        assert "too few queries" in cell.note


def test_peeling_a_non_transitive_relation() -> None:
    """A beats B, B beats C, A does not beat C: three tiers, though C is not separated from
    A; every round removes the configurations no remaining one beats."""
    beats = {("A", "B"), ("B", "C")}
    assert peel_tiers(["A", "B", "C"], lambda x, y: (x, y) in beats) == [["A"], ["B"], ["C"]]
    beats = {("A", "C"), ("B", "C"), ("A", "D")}
    assert peel_tiers(list("ABCD"), lambda x, y: (x, y) in beats) == [["A", "B"], ["C", "D"]]
    with pytest.raises(ValueError, match="cycle"):
        peel_tiers(["A", "B"], lambda x, y: True)


def test_lower_is_better_reverses_the_order_and_the_winner() -> None:
    cell = tier_cells({"leak": _cell({"A": A, "B": B})}, SIG, lower_is_better=lambda key: True)[
        "leak"
    ]
    assert cell.tiers == [["B"], ["A"]]
    assert cell.tests[0]["better"] == "B"
    assert cell.ranks["B"]["observed"] == 1


def test_lower_is_better_tiers_among_three() -> None:
    """The hand-worked cell as a leak: B (0) leaks least, then C (half), then A (1). B beats A
    (p 2/256, Holm 3 x 2/256 < 0.05); C is beaten by neither and beats nothing (4 queries
    differ: p 2/16). Tiers: [B, C], then A; ranks and their intervals run the same way."""
    cell = tier_cells({"leak": _cell({"A": A, "B": B, "C": C})}, SIG,
                      lower_is_better=lambda key: True)["leak"]  # fmt: skip
    assert cell.tiers == [["B", "C"], ["A"]]
    assert cell.beaten_by == {"B": [], "C": [], "A": ["B"]}
    assert {x: r["observed"] for x, r in cell.ranks.items()} == {"B": 1, "C": 2, "A": 3}
    assert (cell.ranks["B"]["low"], cell.ranks["A"]["high"]) == (1, 3)
    assert cell.ranks["B"]["high"] <= cell.ranks["A"]["low"]


def test_too_few_queries_get_no_tiers_but_ranks() -> None:
    cell = tier_cells({"t": _cell({"A": A[:3], "B": B[:3]})}, SIG)["t"]
    assert cell.tiers == [] and "too few queries" in cell.note
    assert set(cell.ranks) == {"A", "B"}
