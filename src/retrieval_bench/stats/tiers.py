"""Tiers among many systems: which configurations the data cannot separate, per group.

The win/loss verdict (`stats.verdicts`) tests the best configuration against each other
one; it does not say which *set* of configurations is tied for first when there are many. Here,
for one group of queries (one type x one metric):

* every pair of configurations is tested with the project's paired sign-flip test
  (`stats.corrections.family_tests`), on the queries all of them scored, and the p-values are
  adjusted (`settings.correction`: Holm or BH) over a family of cells (`compare.family`: the
  cell, every type of a metric, or every type x metric), so the correction spans the pairs and
  the types;
* X *beats* Y when the adjusted p-value of their test is below alpha and X's mean is the better
  one (higher, or lower for a lower-is-better metric);
* tier 1 is every configuration no other configuration beats; remove it; tier 2 is every
  configuration no remaining one beats; and so on until none is left. "X beats Y" implies
  X's mean is strictly better, so the relation has no cycle and each round removes at least
  the best remaining mean: the tiers always exist and are unique;
* significance is not transitive (A beats C while neither A-B nor B-C is significant), so a
  tier is no equivalence class: a configuration may sit below one it is not separated from.
  Each such pair is listed (`unseparated_above`: the configurations in higher tiers that do not
  beat it), beside `beaten_by`, every configuration that does beat it;
* each configuration's rank has a percentile bootstrap interval over the group's paired
  queries (`stats.bootstrap.rank_intervals`), its own, not simultaneous over them;
* a group whose queries are too few for any test to reach significance after the correction
  (`verdicts.too_few`) gets no tiers and says so.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from retrieval_bench.io.strict_json import json_number
from retrieval_bench.stats.bootstrap import rank_intervals
from retrieval_bench.stats.corrections import FamilyTest, family_tests, pair_identity
from retrieval_bench.stats.paired import min_p_value
from retrieval_bench.stats.settings import SignificanceSettings
from retrieval_bench.stats.verdicts import PairedCell, too_few

Key = TypeVar("Key", bound=Hashable)


def peel_tiers(order: Sequence[str], beats: Callable[[str, str], bool]) -> list[list[str]]:
    """The tiers of `order` (configurations best mean first) under `beats(x, y)`: tier 1 is
    every configuration no other beats; it is removed and the rule repeats on the rest. Each
    tier keeps `order`'s order. `beats` must imply a strictly better mean (no cycle)."""
    remaining = list(order)
    tiers: list[list[str]] = []
    while remaining:
        top = [y for y in remaining if not any(beats(x, y) for x in remaining if x != y)]
        if not top:
            raise ValueError("the beats relation has a cycle: no configuration is unbeaten")
        tiers.append(top)
        remaining = [y for y in remaining if y not in top]
    return tiers


@dataclass
class TierCell:
    """One group x metric: the pairwise tests, the tiers and the rank intervals."""

    n: int
    unpaired: int
    means: dict[str, float]
    tiers: list[list[str]] = field(default_factory=list)
    beaten_by: dict[str, list[str]] = field(default_factory=dict)
    unseparated_above: dict[str, list[str]] = field(default_factory=dict)
    ranks: dict[str, dict[str, int]] = field(default_factory=dict)
    tests: list[dict[str, Any]] = field(default_factory=list)
    note: str = ""

    def tier_of(self) -> dict[str, int]:
        return {label: i for i, tier in enumerate(self.tiers, start=1) for label in tier}

    def to_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "unpaired": self.unpaired,
            "means": {k: json_number(v) for k, v in self.means.items()},
            "tiers": self.tiers,
            "tier_of": self.tier_of(),
            "beaten_by": self.beaten_by,
            "unseparated_above": self.unseparated_above,
            "ranks": self.ranks,
            "tests": self.tests,
            "note": self.note,
        }


@dataclass
class _Pending:
    cell: TierCell
    order: list[str]
    arrays: dict[str, np.ndarray]
    pairs: list[tuple[str, str]]
    queries: list[str]


def _pair_json(a: str, b: str, test: FamilyTest, better: str | None) -> dict[str, Any]:
    return {"a": a, "b": b, **test.to_json(), "significant": better is not None, "better": better}


def tier_cells(
    values: Mapping[Key, Mapping[str, Mapping[str, float]]],
    settings: SignificanceSettings,
    min_queries: int = 5,
    family_of: Callable[[Key], Hashable] = lambda key: key,
    lower_is_better: Callable[[Key], bool] = lambda key: False,
    rank_resamples: int = 1000,
) -> dict[Key, TierCell]:
    """The TierCell of every key (e.g. (metric, type)); all pairs of a key's configurations are
    tested and adjusted together with those of every key of the same `family_of(key)` (rules
    in the module docstring)."""
    cells: dict[Key, TierCell] = {}
    pending: dict[Key, _Pending] = {}
    for key, cell_values in values.items():
        paired = PairedCell.of(cell_values, settings, min_queries, lower_is_better(key))
        cells[key] = TierCell(paired.n, paired.unpaired, paired.means, note=paired.note)
        order = paired.order
        if order:
            pairs = [(a, b) for i, a in enumerate(order) for b in order[i + 1 :]]
            pending[key] = _Pending(cells[key], order, paired.arrays, pairs, paired.queries)
    families: dict[Hashable, list[Key]] = {}
    for key in pending:
        families.setdefault(family_of(key), []).append(key)
    for members in families.values():
        samples = [
            (pending[k].arrays[a], pending[k].arrays[b])
            for k in members
            for a, b in pending[k].pairs
        ]
        identities = [
            pair_identity(k, pending[k].queries, labels, *arrays)
            for (k, labels), arrays in zip(
                [(k, pair) for k in members for pair in pending[k].pairs], samples, strict=True
            )
        ]
        tests = iter(family_tests(samples, settings, identities))
        # A type's row and `all` on a set of one type are one test each pair (`pair_identity`).
        size = len(set(identities))
        floor = min(min_p_value(pending[k].cell.n, settings.n_resamples) for k in members)
        for k in members:
            _decide(
                pending[k],
                [next(tests) for _ in pending[k].pairs],
                settings,
                size,
                min_queries,
                floor,
                lower_is_better(k),
                rank_resamples,
            )
    return cells


def _decide(
    item: _Pending,
    tests: Sequence[FamilyTest],
    settings: SignificanceSettings,
    family_size: int,
    min_queries: int,
    floor: float,
    lower: bool,
    rank_resamples: int,
) -> None:
    cell = item.cell
    reason = too_few(cell.n, family_size, settings, min_queries, floor)
    beats: set[tuple[str, str]] = set()
    for (a, b), test in zip(item.pairs, tests, strict=True):
        diff = test.result.diff  # mean(a) - mean(b)
        better = None
        if not reason and test.p_adjusted < settings.alpha and diff != 0:
            better = a if (diff < 0) == lower else b
            beats.add((better, b if better == a else a))
        cell.tests.append(_pair_json(a, b, test, better))
    ranked = rank_intervals(
        [item.arrays[label] for label in item.order],
        rank_resamples,
        settings.seed,
        settings.confidence,
        lower,
    )
    cell.ranks = {
        label: {"observed": o, "low": lo, "high": hi}
        for label, (o, lo, hi) in zip(item.order, ranked, strict=True)
    }
    if reason:
        cell.note = reason
        return
    cell.tiers = peel_tiers(item.order, lambda x, y: (x, y) in beats)
    tier_of = cell.tier_of()
    for label in item.order:
        cell.beaten_by[label] = [x for x in item.order if (x, label) in beats]
        above = [x for x in item.order if tier_of[x] < tier_of[label] and (x, label) not in beats]
        if above:
            cell.unseparated_above[label] = above
    if len(cell.tiers) == 1:
        cell.note = "one tier: no configuration beats another"
    else:
        cell.note = f"{len(cell.tiers)} tiers; first: {', '.join(cell.tiers[0])}"
