"""Multiple-testing corrections of a family of paired tests, and the confidence level each
test's interval is drawn at so it agrees with its corrected verdict.

A family of tests (`family_tests`) is adjusted together by `settings.correction`:

* `holm` (family-wise error; scipy has no Holm): each test's CI is drawn at the level of its
  Holm step (`holm_levels`): Holm tests the i-th smallest of m p-values at alpha / (m - i), so
  a rejected test's CI is the 1 - (1 - confidence) / (m - i) interval and an accepted test's
  that of the step where Holm stopped.
* `bh` (Benjamini-Hochberg, false discovery rate; the adjusted p-values are scipy's
  `false_discovery_control`): every CI at 1 - R (1 - confidence) / m, R the number of tests BH
  rejects (at least 1): Benjamini & Yekutieli's (2005) FCR-adjusted intervals for the R
  selected tests; the unselected ones get the same level, at which each holds 0 (its p-value is
  above R alpha / m), which BY leave undefined (`bh_levels`).

With confidence = 1 - alpha (the default) a CI printed beside a verdict excludes 0 exactly when
the verdict is significant; `ci_agrees` records it.

A family counts each distinct test once: two rows that compare the same configurations on the
same queries of the same measure (a query type's row and `all` on a set of one type) are one
test, with one p-value, one CI and one place in the correction (`pair_identity`).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from retrieval_bench.config.compare import CORRECTIONS
from retrieval_bench.stats.paired import PairedResult, paired_sign_flip
from retrieval_bench.stats.settings import SignificanceSettings


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the input order (step-down, monotone, capped at 1).

    The i-th smallest of m p-values is multiplied by (m - i), and each adjusted value is at
    least the one before it; rejecting where adjusted < alpha controls the family-wise error.
    """
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * float(p_values[i])))
        adjusted[i] = running
    return adjusted


def holm_levels(p_values: Sequence[float], alpha: float, confidence: float) -> list[float]:
    """The confidence level of each test's Holm step, in the input order.

    Holm tests the i-th smallest (0-based, ties in input order as in `holm`) of m p-values at
    alpha / (m - i) and stops at the first it cannot reject, step s; every later test is then
    accepted at that step. So a rejected test's interval is the 1 - (1 - confidence) / (m - i)
    one, and every accepted test's the 1 - (1 - confidence) / (m - s) one: wider than its own
    step's, so it holds 0 as its verdict says (with confidence = 1 - alpha, the default)."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = holm(p_values)
    stop = next((rank for rank, i in enumerate(order) if adjusted[i] >= alpha), m)
    levels = [confidence] * m
    for rank, i in enumerate(order):
        levels[i] = 1.0 - (1.0 - confidence) / (m - min(rank, stop))
    return levels


def bh(p_values: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values, in the input order (step-up: the i-th smallest
    of m is min over j >= i of m p_(j) / j, capped at 1); rejecting where adjusted < alpha
    controls the false discovery rate (independent or positively dependent tests)."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [1.0] * m
    running = 1.0
    for rank in range(m - 1, -1, -1):
        i = order[rank]
        running = min(running, m * float(p_values[i]) / (rank + 1))
        adjusted[i] = running
    return adjusted


def bh_levels(p_values: Sequence[float], alpha: float, confidence: float) -> list[float]:
    """Every test's CI level under BH: 1 - max(R, 1) (1 - confidence) / m, R the number BH
    rejects (module docstring). A rejected test's p-value is below R alpha / m and an accepted
    one's above it, so with confidence = 1 - alpha each CI agrees with its verdict."""
    m = len(p_values)
    rejected = sum(1 for p in bh(p_values) if p < alpha)
    return [1.0 - max(rejected, 1) * (1.0 - confidence) / m] * m


def adjust(p_values: Sequence[float], correction: str) -> list[float]:
    """The p-values adjusted by `correction` (`CORRECTIONS`)."""
    if correction == "holm":
        return holm(p_values)
    if correction == "bh":
        return bh(p_values)
    raise ValueError(f"correction must be one of {', '.join(CORRECTIONS)}, got {correction!r}")


def correction_levels(p_values: Sequence[float], settings: SignificanceSettings) -> list[float]:
    """The CI level of each test of a family under `settings.correction`."""
    levels = holm_levels if settings.correction == "holm" else bh_levels
    return levels(p_values, settings.alpha, settings.confidence)


@dataclass(frozen=True)
class FamilyTest:
    """One test of a family: its result (CI at `ci_level`), the p-value adjusted by
    `correction`, and whether the CI excludes 0 exactly when that is below alpha."""

    result: PairedResult
    p_adjusted: float
    ci_level: float
    ci_agrees: bool
    correction: str = "holm"

    @property
    def p_holm(self) -> float:
        """The adjusted p-value under its old name (Holm was the only correction)."""
        return self.p_adjusted

    def to_json(self) -> dict[str, Any]:
        """`p_adjusted`, also under `p_<correction>` (`p_holm`, as earlier files had it)."""
        return {
            **self.result.to_json(),
            "p_adjusted": self.p_adjusted,
            f"p_{self.correction}": self.p_adjusted,
            "correction": self.correction,
            "ci_level": self.ci_level,
        }


def family_tests(
    pairs: Sequence[tuple[np.ndarray, np.ndarray]],
    settings: SignificanceSettings,
    identities: Sequence[Hashable] | None = None,
) -> list[FamilyTest]:
    """Paired tests of one family: sign-flip p-values, adjusted together by
    `settings.correction`, and each CI at the matching level (see the module docstring).

    Pairs with the same identity (`identities`, one per pair; `pair_identity`: the same
    configurations on the same queries of the same measure, e.g. a query type's row and `all`
    on a set of one type) are one test: tested once, counted once in the correction, and each
    given that test's result. Without identities every pair is a test of its own."""
    keys: list[Hashable] = list(range(len(pairs))) if identities is None else list(identities)
    if len(keys) != len(pairs):
        raise ValueError(f"{len(keys)} identities for {len(pairs)} pairs")
    slot: dict[Hashable, int] = {}
    distinct: list[int] = []
    for i, key in enumerate(keys):
        if key not in slot:
            slot[key] = len(distinct)
            distinct.append(i)
        else:
            first = distinct[slot[key]]
            if not all(np.array_equal(x, y) for x, y in zip(pairs[i], pairs[first], strict=True)):
                raise ValueError(f"pairs {first} and {i} share an identity but not their values")
    tests = [paired_sign_flip(*pairs[i], settings) for i in distinct]
    p_values = [result.p_value for result, _ in tests]
    adjusted = adjust(p_values, settings.correction)
    levels = correction_levels(p_values, settings)
    out = []
    for (result, test), p_adj, level in zip(tests, adjusted, levels, strict=True):
        if test is not None:
            low, high = test.interval(level)
            result = PairedResult(
                result.n, result.mean_a, result.mean_b, result.diff, low, high, result.p_value
            )
        excludes_zero = result.ci_low > 0 or result.ci_high < 0
        agrees = excludes_zero == (p_adj < settings.alpha)
        out.append(FamilyTest(result, p_adj, level, agrees, settings.correction))
    return [out[slot[key]] for key in keys]


def pair_identity(
    key: Hashable, queries: Sequence[str], labels: tuple[str, ...], a: np.ndarray, b: np.ndarray
) -> Hashable:
    """What makes two tests of a family one test: the same measure (the cell key without its
    query group: a key is `(..., group)`, or the group alone), the same configurations
    (`labels`), the same queries and the same paired values `a`, `b` (so only rows that are
    the same data merge). On a set of one query type, the type's row and `all` have the same
    identity: one test, not two."""
    measure = key[:-1] if isinstance(key, tuple) else ()
    return (measure, labels, tuple(queries), a.tobytes(), b.tobytes())
