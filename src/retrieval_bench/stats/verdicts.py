"""Verdicts from per-query values: who wins a group of queries, and by how much a setting moves.

Input everywhere is `{config label: {query id: value}}` for one metric on one group of queries
(one query type, or all). Only queries scored by every configuration compared are used, so each
mean rests on the same queries; the cell records how many (`n`) and how many were left out.

Verdict of a cell (one type x one metric):

* the best configuration (highest mean) is tested against every other one (paired randomization
  test), adjusted (Holm, or BH: `settings.correction`) over the cell's *family* (`FAMILIES`):
  the cell alone, every type of its metric, or every type x metric of the table (the default:
  the family a reader scans);
* each CI is drawn at the confidence level the correction gives its test, so it agrees with
  the verdict beside it (`stats.corrections.family_tests`);
* each test carries its power (`stats.power`: the minimum detectable effect at alpha / m and
  the queries needed for `target_delta`) and PyTerrier's improved / degraded / unchanged
  counts of the other configuration's queries relative to the best;
* `win`: the best, significantly better than every other; `second`: the runner-up when there is
  a winner and more than one other configuration (with two, the other simply `lose`s); `tie`:
  not significantly different from the best (the best itself is `tie` when anything ties with
  it); `lose`: significantly worse than the best and not `second`;
* a cell whose queries are too few to ever reach significance (n below `min_queries`, or even a
  unanimous difference could not get below alpha after Holm over its family) gets no verdicts
  and says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from retrieval_bench.config.compare import FAMILIES
from retrieval_bench.io.strict_json import json_number
from retrieval_bench.stats.corrections import FamilyTest, family_tests, pair_identity
from retrieval_bench.stats.paired import at_floor, ci_json, min_p_value
from retrieval_bench.stats.power import paired_counts, per_test_alpha, power_entry, summary
from retrieval_bench.stats.settings import SignificanceSettings

WIN, SECOND, TIE, LOSE = "win", "second", "tie", "lose"
VERDICTS = (WIN, SECOND, TIE, LOSE)
# The row of every query, whatever its type.
ALL = "all"

Key = TypeVar("Key", bound=Hashable)


def paired_values(
    values: Mapping[str, Mapping[str, float]],
) -> tuple[list[str], dict[str, np.ndarray], int]:
    """Query ids scored (with a finite value) by every configuration, sorted; the aligned arrays;
    and how many queries some but not all configurations scored."""
    sets = [
        {q for q, v in per_query.items() if v is not None and math.isfinite(v)}
        for per_query in values.values()
    ]
    if not sets:
        return [], {}, 0
    common = set.intersection(*sets)
    union = set.union(*sets)
    qids = sorted(common)
    arrays = {
        label: np.array([per_query[q] for q in qids], dtype=np.float64)
        for label, per_query in values.items()
    }
    return qids, arrays, len(union) - len(common)


def too_few(
    n: int,
    comparisons: int,
    settings: SignificanceSettings,
    min_queries: int,
    family_floor: float | None = None,
) -> str:
    """Why `n` paired queries cannot decide a test adjusted over `comparisons` tests ('' if
    they can). `family_floor`: the smallest p-value any test of the family can reach (default:
    this test's own); Holm's first step multiplies it by `comparisons`, and every adjusted
    p-value is at least that. BH can adjust a p-value down to itself (when every test of the
    family is as small), so there only the test's own floor counts."""
    if n == 0:
        return "no query scored by every configuration"
    if n < min_queries:
        return f"too few queries to decide (n={n} < {min_queries})"
    own = min_p_value(n, settings.n_resamples)
    floor = own if family_floor is None else family_floor
    factor = max(1, comparisons) if settings.correction == "holm" else 1
    if max(own, floor * factor) >= settings.alpha:
        # Even a unanimous difference could not reach alpha after the correction.
        return f"too few queries to decide (n={n}: no difference could be significant)"
    return ""


@dataclass
class PairedCell:
    """One group's values paired across configurations: the means, and the configurations
    best mean first (`order`, stable on ties), empty with a `note` when there is nothing to
    test (one configuration, or no query every configuration scored)."""

    n: int
    unpaired: int
    means: dict[str, float]
    arrays: dict[str, np.ndarray]
    order: list[str]
    note: str = ""
    # The paired queries, sorted (what the arrays are aligned on).
    queries: list[str] = field(default_factory=list)

    @classmethod
    def of(
        cls,
        values: Mapping[str, Mapping[str, float]],
        settings: SignificanceSettings,
        min_queries: int,
        lower_is_better: bool = False,
    ) -> PairedCell:
        labels = list(values)
        qids, arrays, unpaired = paired_values(values)
        n = len(qids)
        means = {label: float(arrays[label].mean()) if n else math.nan for label in labels}
        if len(labels) < 2:
            return cls(n, unpaired, means, arrays, [], "one configuration: nothing to compare")
        if n == 0:
            return cls(n, unpaired, means, arrays, [], too_few(0, 0, settings, min_queries))
        sign = 1.0 if lower_is_better else -1.0
        order = sorted(labels, key=lambda label: sign * means[label])
        return cls(n, unpaired, means, arrays, order, queries=qids)


@dataclass
class Cell:
    """One query group x one metric across configurations."""

    n: int
    unpaired: int
    means: dict[str, float]
    verdicts: dict[str, str] = field(default_factory=dict)
    best: str | None = None
    note: str = ""
    tests: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The cell's power (`stats.power.summary` of its tests).
    power: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "unpaired": self.unpaired,
            "means": {k: json_number(v) for k, v in self.means.items()},
            "verdicts": self.verdicts,
            "best": self.best,
            "note": self.note,
            "tests": self.tests,
            "power": self.power,
        }


def _test_json(
    test: FamilyTest,
    against: str,
    settings: SignificanceSettings,
    family: str,
    power: dict[str, Any],
    counts: dict[str, int],
) -> dict[str, Any]:
    """A test of the best against another configuration; `counts`: the other configuration's
    queries improved / degraded / unchanged relative to the best."""
    r = test.result
    return {
        "against": against,
        **test.to_json(),
        "p_at_floor": at_floor(r.p_value, r.n, settings.n_resamples),
        "ci_agrees": test.ci_agrees,
        "family": family,
        **counts,
        "power": power,
    }


def _power(
    a: np.ndarray, b: np.ndarray, settings: SignificanceSettings, family_size: int
) -> dict[str, Any]:
    """The power of the test of a against b in a family of `family_size` (`stats.power`)."""
    alpha_test = per_test_alpha(settings.alpha, family_size)
    return power_entry(
        a - b, alpha_test, settings.power, settings.target_delta, settings.n_resamples
    )


def _enough(reason: str, power: dict[str, Any], settings: SignificanceSettings) -> str:
    """A "too few queries" reason with how many would be enough for the target difference."""
    if power.get("n_needed") is not None:
        return f"{reason}; {power['n_needed']} would detect {settings.target_delta:g}"
    return reason


@dataclass
class _Pending:
    """A cell whose tests (best against each other) wait for their family's Holm."""

    cell: Cell
    order: list[str]
    arrays: dict[str, np.ndarray]
    queries: list[str] = field(default_factory=list)


def verdict_cells(
    values: Mapping[Key, Mapping[str, Mapping[str, float]]],
    settings: SignificanceSettings,
    min_queries: int = 5,
    family_of: Callable[[Key], Hashable] = lambda key: key,
    family_name: str = "cell",
    lower_is_better: Callable[[Key], bool] = lambda key: False,
) -> dict[Key, Cell]:
    """The cell of every key (e.g. (metric, type)), each cell's tests Holm-adjusted together
    with those of every cell of the same `family_of(key)` (rules in the module docstring).
    Where `lower_is_better(key)` (leak@K), the best configuration is the lowest mean and a
    significant difference must go that way."""
    cells: dict[Key, Cell] = {}
    pending: dict[Key, _Pending] = {}
    for key, cell_values in values.items():
        paired = PairedCell.of(cell_values, settings, min_queries, lower_is_better(key))
        cells[key] = Cell(n=paired.n, unpaired=paired.unpaired, means=paired.means)
        cells[key].note = paired.note
        if paired.order:
            pending[key] = _Pending(cells[key], paired.order, paired.arrays, paired.queries)
    families: dict[Hashable, list[Key]] = {}
    for key in pending:
        families.setdefault(family_of(key), []).append(key)
    for members in families.values():
        pairs = [
            (pending[k].arrays[pending[k].order[0]], pending[k].arrays[o])
            for k in members
            for o in pending[k].order[1:]
        ]
        identities = [
            pair_identity(k, pending[k].queries, (pending[k].order[0], o), a, b)
            for (k, o), (a, b) in zip(
                [(k, o) for k in members for o in pending[k].order[1:]], pairs, strict=True
            )
        ]
        tests = iter(family_tests(pairs, settings, identities))
        # A type's row and `all` on a set of one type are one test (`pair_identity`).
        size = len(set(identities))
        floor = min(min_p_value(pending[k].cell.n, settings.n_resamples) for k in members)
        for k in members:
            item = pending[k]
            best, others = item.order[0], item.order[1:]
            results = {o: next(tests) for o in others}
            a = item.arrays[best]
            powers = {o: _power(a, item.arrays[o], settings, size) for o in others}
            item.cell.tests = {
                o: _test_json(
                    t, best, settings, family_name, powers[o], paired_counts(item.arrays[o], a)
                )
                for o, t in results.items()
            }
            item.cell.power = summary(list(powers.values()))
            reason = too_few(item.cell.n, size, settings, min_queries, floor)
            if reason:
                item.cell.note = _enough(reason, item.cell.power, settings)
                continue
            better = -1.0 if lower_is_better(k) else 1.0
            significant = {
                o: t.p_adjusted < settings.alpha and better * t.result.diff > 0
                for o, t in results.items()
            }
            _decide(item.cell, item.order, significant)
    return cells


def _decide(cell: Cell, order: Sequence[str], significant: Mapping[str, bool]) -> None:
    best, others = order[0], order[1:]
    if all(significant.values()):
        cell.best = best
        cell.verdicts[best] = WIN
        runner_up = cell.means[others[0]]
        for o in others:
            # "second" only means something among several losers.
            cell.verdicts[o] = SECOND if len(others) > 1 and cell.means[o] == runner_up else LOSE
        cell.note = f"{best} wins"
    else:
        tied = [best, *(o for o in others if not significant[o])]
        for label in order:
            cell.verdicts[label] = TIE if label in tied else LOSE
        cell.note = "no significant difference: " + ", ".join(tied)


def verdict_cell(
    values: Mapping[str, Mapping[str, float]],
    settings: SignificanceSettings,
    min_queries: int = 5,
) -> Cell:
    """Means, best configuration and verdicts for one group, Holm over the cell alone."""
    return verdict_cells({0: values}, settings, min_queries)[0]


@dataclass
class Delta:
    """One setting against the baseline on one group x metric; `p_adjusted` by `correction`
    over `family`, the CI at `ci_level`, the level that correction gives it; improved /
    degraded / unchanged: the setting's queries relative to the baseline."""

    setting: str
    n: int
    unpaired: int
    baseline: float
    value: float
    diff: float
    ci_low: float
    ci_high: float
    p_value: float
    p_adjusted: float
    significant: bool
    note: str = ""
    ci_level: float = math.nan
    ci_agrees: bool = True
    p_at_floor: bool = False
    family: str = "cell"
    correction: str = "holm"
    improved: int = 0
    degraded: int = 0
    unchanged: int = 0
    power: dict[str, Any] = field(default_factory=dict)

    @property
    def p_holm(self) -> float:
        """The adjusted p-value under its old name (Holm was the only correction)."""
        return self.p_adjusted

    def to_json(self) -> dict[str, Any]:
        """Strict JSON (`paired.ci_json`); the adjusted p-value also as `p_<correction>`."""
        out = {k: json_number(v) if isinstance(v, float) else v for k, v in self.__dict__.items()}
        out[f"p_{self.correction}"] = self.p_adjusted
        return {**out, **ci_json(self.ci_low, self.ci_high)}


def delta_families(
    cells: Mapping[Key, tuple[Mapping[str, float], Mapping[str, Mapping[str, float]]]],
    settings: SignificanceSettings,
    min_queries: int = 5,
    family_of: Callable[[Key], Hashable] = lambda key: key,
    family_name: str = "cell",
) -> dict[Key, list[Delta]]:
    """For every key's (baseline values, {setting: values}): each setting minus the baseline,
    paired on the queries both scored, Holm-adjusted with every test of the same family (a
    type's row and `all` on a set of one type counted once: `pair_identity`)."""
    paired: dict[Key, list[tuple[str, np.ndarray, np.ndarray, int, Hashable]]] = {}
    for key, (baseline, settings_values) in cells.items():
        paired[key] = []
        for name, per_query in settings_values.items():
            qids, arrays, unpaired = paired_values({"before": baseline, "after": per_query})
            identity = pair_identity(key, qids, (name,), arrays["after"], arrays["before"])
            paired[key].append((name, arrays["after"], arrays["before"], unpaired, identity))
    families: dict[Hashable, list[Key]] = {}
    for key in paired:
        families.setdefault(family_of(key), []).append(key)
    out: dict[Key, list[Delta]] = {}
    for members in families.values():
        rows = [row for k in members for row in paired[k]]
        identities = [row[4] for row in rows]
        pairs = [(after, before) for _, after, before, _, _ in rows]
        tests = iter(family_tests(pairs, settings, identities))
        size = len(set(identities))
        sizes = [after.size for _, after, _, _, _ in rows if after.size]
        floor = min((min_p_value(n, settings.n_resamples) for n in sizes), default=1.0)
        for k in members:
            out[k] = []
            for name, after, before, unpaired, _ in paired[k]:
                test = next(tests)
                r = test.result
                power = _power(after, before, settings, size)
                reason = too_few(r.n, size, settings, min_queries, floor)
                out[k].append(
                    Delta(
                        setting=name,
                        n=r.n,
                        unpaired=unpaired,
                        baseline=r.mean_b,
                        value=r.mean_a,
                        diff=r.diff,
                        ci_low=r.ci_low,
                        ci_high=r.ci_high,
                        p_value=r.p_value,
                        p_adjusted=test.p_adjusted,
                        significant=not reason and test.p_adjusted < settings.alpha and r.diff != 0,
                        note=_enough(reason, power, settings) if reason else "",
                        ci_level=test.ci_level,
                        ci_agrees=test.ci_agrees,
                        p_at_floor=at_floor(r.p_value, r.n, settings.n_resamples),
                        family=family_name,
                        correction=settings.correction,
                        **paired_counts(after, before),
                        power=power,
                    )
                )
    return out


def delta_cells(
    baseline: Mapping[str, float],
    settings_values: Mapping[str, Mapping[str, float]],
    settings: SignificanceSettings,
    min_queries: int = 5,
) -> list[Delta]:
    """Each setting minus the baseline (paired on queries both scored), Holm over the settings."""
    return delta_families({0: (baseline, settings_values)}, settings, min_queries)[0]


def family_key(family: str) -> Callable[[tuple[str, str]], Hashable]:
    """The Holm family of a (metric, type) cell under `compare.family`."""
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {', '.join(FAMILIES)}, got {family!r}")
    if family == "cell":
        return lambda key: key
    if family == "metric":
        return lambda key: key[0]
    return lambda key: None


def ordered_types(types: Sequence[str]) -> list[str]:
    """Query types sorted, with the `all` row last."""
    return [*sorted(t for t in set(types) if t != ALL), ALL]
