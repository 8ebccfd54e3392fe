"""Tiers among many systems: which configurations the data cannot separate, per group.

The win/loss verdict (`scoring.comparison`) tests the best configuration against each other
one; it does not say which *set* of configurations is tied for first when there are many. Here,
for one group of queries (one type x one metric):

* every pair of configurations is tested with the project's paired sign-flip test
  (`significance.family_tests`), on the queries all of them scored, and the p-values are
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
* each configuration's rank has a percentile bootstrap interval: `rank_resamples` resamples of
  the group's paired queries with replacement (numpy `default_rng(seed)`, the same stream for
  every group), the competition rank of each resample's means (1 + the configurations with a
  strictly better mean, so equal means share a rank), and its (1 - confidence) / 2 and
  1 - (1 - confidence) / 2 quantiles (inverted CDF: ranks that occurred). The interval is each
  configuration's own, not simultaneous over them;
* a group whose queries are too few for any test to reach significance after the correction
  (`comparison.too_few`) gets no tiers and says so.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from retrieval_bench.io import json_number
from retrieval_bench.scoring.comparison import PairedCell, too_few
from retrieval_bench.scoring.significance import (
    FamilyTest,
    SignificanceSettings,
    family_tests,
    min_p_value,
)

Key = TypeVar("Key", bound=Hashable)

# Means closer than this are equal for the rank bootstrap (float sums of equal values).
_MEAN_TOLERANCE = 1e-12
# Resampled values held at once (configurations x resamples x queries).
_CHUNK_ELEMENTS = 1 << 22


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


def competition_ranks(means: np.ndarray, lower_is_better: bool = False) -> np.ndarray:
    """Rank of each row's mean per column (1 + the rows with a strictly better mean);
    `means`: configurations x resamples."""
    signed = -means if lower_is_better else means
    better = signed[None, :, :] > signed[:, None, :] + _MEAN_TOLERANCE
    return 1 + better.sum(axis=1)


def rank_intervals(
    arrays: Sequence[np.ndarray],
    n_resamples: int,
    seed: int,
    confidence: float,
    lower_is_better: bool = False,
) -> list[tuple[int, int, int]]:
    """(observed rank, low, high) of each configuration's paired values `arrays` (one array per
    configuration, the same queries in the same order): the percentile bootstrap of the module
    docstring."""
    values = np.vstack([np.asarray(a, dtype=np.float64) for a in arrays])
    k, n = values.shape
    observed = competition_ranks(values.mean(axis=1)[:, None], lower_is_better)[:, 0]
    rng = np.random.default_rng(seed)
    rows = max(1, _CHUNK_ELEMENTS // max(1, k * n))
    parts = []
    for start in range(0, n_resamples, rows):
        size = min(rows, n_resamples - start)
        picks = rng.integers(0, n, size=(size, n))
        parts.append(competition_ranks(values[:, picks].mean(axis=2), lower_is_better))
    ranks = np.concatenate(parts, axis=1)
    tail = (1.0 - confidence) / 2.0
    low = np.quantile(ranks, tail, axis=1, method="inverted_cdf")
    high = np.quantile(ranks, 1.0 - tail, axis=1, method="inverted_cdf")
    return [(int(o), int(lo), int(hi)) for o, lo, hi in zip(observed, low, high, strict=True)]


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
            pending[key] = _Pending(cells[key], order, paired.arrays, pairs)
    families: dict[Hashable, list[Key]] = {}
    for key in pending:
        families.setdefault(family_of(key), []).append(key)
    for members in families.values():
        tests = iter(
            family_tests(
                [
                    (pending[k].arrays[a], pending[k].arrays[b])
                    for k in members
                    for a, b in pending[k].pairs
                ],
                settings,
            )
        )
        size = sum(len(pending[k].pairs) for k in members)
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
