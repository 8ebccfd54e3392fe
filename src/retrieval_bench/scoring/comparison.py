"""Verdicts from per-query values: who wins a group of queries, and by how much a setting moves.

Input everywhere is `{config label: {query id: value}}` for one metric on one group of queries
(one query type, or all). Only queries scored by every configuration compared are used, so each
mean rests on the same queries; the cell records how many (`n`) and how many were left out.

Verdict of a cell (one type x one metric):

* the best configuration (highest mean) is tested against every other one (paired randomization
  test, Holm-adjusted over those comparisons);
* `win`: the best, significantly better than every other; `second`: the runner-up when there is
  a winner; `tie`: not significantly different from the best (the best itself is `tie` when
  anything ties with it); `lose`: significantly worse than the best and not `second`;
* a cell whose queries are too few to ever reach significance (n below `min_queries`, or even a
  unanimous difference could not get below alpha after Holm) gets no verdicts and says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from retrieval_bench.scoring.significance import (
    PairedResult,
    SignificanceSettings,
    holm,
    min_p_value,
    paired_test,
)

WIN, SECOND, TIE, LOSE = "win", "second", "tie", "lose"
VERDICTS = (WIN, SECOND, TIE, LOSE)
# The row of every query, whatever its type.
ALL = "all"


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


def too_few(n: int, comparisons: int, settings: SignificanceSettings, min_queries: int) -> str:
    """Why `n` paired queries cannot decide `comparisons` Holm-adjusted tests ('' if they can)."""
    if n == 0:
        return "no query scored by every configuration"
    if n < min_queries:
        return f"too few queries to decide (n={n} < {min_queries})"
    floor = min_p_value(n, settings.n_resamples) * max(1, comparisons)
    if floor >= settings.alpha:
        # Even a unanimous difference could not reach alpha after Holm.
        return f"too few queries to decide (n={n}: no difference could be significant)"
    return ""


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

    def to_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "unpaired": self.unpaired,
            "means": self.means,
            "verdicts": self.verdicts,
            "best": self.best,
            "note": self.note,
            "tests": self.tests,
        }


def _test_json(result: PairedResult, p_holm: float, against: str) -> dict[str, Any]:
    return {"against": against, **result.to_json(), "p_holm": p_holm}


def verdict_cell(
    values: Mapping[str, Mapping[str, float]],
    settings: SignificanceSettings,
    min_queries: int = 5,
) -> Cell:
    """Means, best configuration and verdicts for one group (rules in the module docstring)."""
    labels = list(values)
    qids, arrays, unpaired = paired_values(values)
    n = len(qids)
    means = {label: float(arrays[label].mean()) if n else math.nan for label in labels}
    cell = Cell(n=n, unpaired=unpaired, means=means)
    if len(labels) < 2:
        cell.note = "one configuration: nothing to compare"
        return cell
    if n == 0:
        cell.note = too_few(0, 0, settings, min_queries)
        return cell
    # Stable: equal means keep the configurations' order.
    order = sorted(labels, key=lambda label: -means[label])
    best = order[0]
    others = order[1:]
    results = [paired_test(arrays[best], arrays[o], settings) for o in others]
    adjusted = holm([r.p_value for r in results])
    cell.tests = {
        o: _test_json(r, p, best) for o, r, p in zip(others, results, adjusted, strict=True)
    }
    reason = too_few(n, len(others), settings, min_queries)
    if reason:
        cell.note = reason
        return cell
    significant = {
        o: p < settings.alpha and r.diff > 0
        for o, r, p in zip(others, results, adjusted, strict=True)
    }
    if all(significant.values()):
        cell.best = best
        cell.verdicts[best] = WIN
        runner_up = means[others[0]]
        for o in others:
            cell.verdicts[o] = SECOND if means[o] == runner_up else LOSE
        cell.note = f"{best} wins"
    else:
        tied = [best, *(o for o in others if not significant[o])]
        for label in order:
            cell.verdicts[label] = TIE if label in tied else LOSE
        cell.note = "no significant difference: " + ", ".join(tied)
    return cell


def paired_change(
    before: Mapping[str, float],
    after: Mapping[str, float],
    settings: SignificanceSettings,
) -> tuple[PairedResult, int]:
    """`after` minus `before` on the queries both scored (`diff` = mean(after) - mean(before)),
    and how many queries only one of them scored."""
    _, arrays, unpaired = paired_values({"before": before, "after": after})
    return paired_test(arrays["after"], arrays["before"], settings), unpaired


@dataclass
class Delta:
    """One setting against the baseline on one group x metric."""

    setting: str
    n: int
    unpaired: int
    baseline: float
    value: float
    diff: float
    ci_low: float
    ci_high: float
    p_value: float
    p_holm: float
    significant: bool
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def delta_cells(
    baseline: Mapping[str, float],
    settings_values: Mapping[str, Mapping[str, float]],
    settings: SignificanceSettings,
    min_queries: int = 5,
) -> list[Delta]:
    """Each setting minus the baseline (paired on queries both scored), Holm over the settings."""
    tested = [
        (name, *paired_change(baseline, per_query, settings))
        for name, per_query in settings_values.items()
    ]
    adjusted = holm([r.p_value for _, r, _ in tested])
    out = []
    for (name, r, unpaired), p in zip(tested, adjusted, strict=True):
        reason = too_few(r.n, len(tested), settings, min_queries)
        out.append(
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
                p_holm=p,
                significant=not reason and p < settings.alpha and r.diff != 0,
                note=reason,
            )
        )
    return out


def ordered_types(types: Sequence[str]) -> list[str]:
    """Query types sorted, with the `all` row last."""
    return [*sorted(t for t in set(types) if t != ALL), ALL]
