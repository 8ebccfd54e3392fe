"""Paired significance for two systems scored on the same queries.

Why paired: queries differ far more in difficulty than systems do, so the signal is in the
per-query differences, not in two independent means. Both tools below work on those differences:

* paired randomization (sign-flip) test: `scipy.stats.permutation_test` with
  `permutation_type="samples"`, which swaps each query's two values at random (exact when
  2**n <= n_resamples); two-sided, statistic = mean(a - b);
* paired bootstrap confidence interval of mean(a - b): `scipy.stats.bootstrap` over the
  per-query differences (BCa; percentile when BCa is undefined on degenerate data).

Both are seeded (`seed`), so a report is reproducible bit for bit. `holm` is Holm's step-down
adjustment for a family of such tests (scipy has no Holm; `false_discovery_control` is BH/BY).

A family of tests (`family_tests`) is adjusted together, and each test's CI is drawn at the
confidence level of its Holm step (`holm_levels`): the i-th smallest of m p-values is tested at
alpha / (m - i), so its CI is the 1 - (1 - confidence) / (m - i) interval. A CI printed beside a
verdict then comes from the same family and correction as the verdict; unadjusted, a 95% CI can
exclude 0 beside a "tie" whose Holm p is 0.07. (The CI and the p-value are two resamplings, so
at the margin they can still disagree; `ci_agrees` says when they do.)
"""

from __future__ import annotations

import inspect
import math
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class SignificanceSettings:
    """How every paired comparison in a report is tested; echoed into the report."""

    alpha: float = 0.05
    n_resamples: int = 10000
    confidence: float = 0.95
    seed: int = 0


@dataclass(frozen=True)
class PairedResult:
    """a versus b on `n` queries scored by both; `diff` = mean(a) - mean(b)."""

    n: int
    mean_a: float
    mean_b: float
    diff: float
    ci_low: float
    ci_high: float
    p_value: float

    def to_json(self) -> dict[str, float | int]:
        return asdict(self)


# scipy >= 1.15 takes `rng`; older releases take `random_state` (same generator semantics).
_RNG_KW = "rng" if "rng" in inspect.signature(stats.permutation_test).parameters else "random_state"


def _mean_diff(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(a - b, axis=axis)


def paired_test(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    settings: SignificanceSettings = SignificanceSettings(),
) -> PairedResult:
    """Randomization-test p-value and bootstrap CI of mean(a - b) over paired values."""
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"paired samples need equal 1-d shapes, got {x.shape} and {y.shape}")
    n = int(x.size)
    if n == 0:
        nan = math.nan
        return PairedResult(0, nan, nan, nan, nan, nan, 1.0)
    p = _p_value(x, y, settings)
    low, high = _bootstrap_ci(x - y, settings)
    return PairedResult(n, float(x.mean()), float(y.mean()), float((x - y).mean()), low, high, p)


def _p_value(x: np.ndarray, y: np.ndarray, settings: SignificanceSettings) -> float:
    """The two-sided sign-flip p-value of mean(x - y) (n > 0)."""
    d = x - y
    if np.all(d == d[0]):
        # Every query moved by the same amount: no resampling can vary it. A constant non-zero
        # shift is as one-sided as data gets; its p-value is the smallest the sign-flip test
        # can give, computed exactly rather than by a degenerate resampling.
        return 1.0 if d[0] == 0 else min(1.0, min_p_value(int(d.size), settings.n_resamples))
    perm = stats.permutation_test(
        (x, y),
        _mean_diff,
        permutation_type="samples",
        vectorized=True,
        n_resamples=settings.n_resamples,
        alternative="two-sided",
        **{_RNG_KW: np.random.default_rng(settings.seed)},
    )
    return float(min(1.0, perm.pvalue))


def _bootstrap_ci(d: np.ndarray, settings: SignificanceSettings) -> tuple[float, float]:
    if d.size < 2 or np.all(d == d[0]):
        return float(d[0]), float(d[0])
    for method in ("BCa", "percentile"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = stats.bootstrap(
                (d,),
                np.mean,
                n_resamples=settings.n_resamples,
                confidence_level=settings.confidence,
                method=method,
                vectorized=True,
                **{_RNG_KW: np.random.default_rng(settings.seed)},
            )
        low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if math.isfinite(low) and math.isfinite(high):
            return low, high
    return math.nan, math.nan


def min_p_value(n: int, n_resamples: int) -> float:
    """The smallest two-sided p-value the sign-flip test can return on `n` pairs.

    Exact: the observed signs and their mirror image always count, so 2 / 2**n. Randomized
    (2**n > n_resamples): scipy adds the observed statistic, so about 2 / (n_resamples + 1).
    A group whose smallest possible p-value, after Holm, is above alpha cannot decide anything
    however large the difference: reports say so instead of declaring a winner.
    """
    if n <= 0:
        return 1.0
    exact = 2.0 / 2.0**n if n < 1024 else 0.0
    return min(1.0, max(exact, 2.0 / (n_resamples + 1)))


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


def resampling_floor(n: int, n_resamples: int) -> float | None:
    """The smallest p-value the randomized test reports on `n` pairs, 2 / (n_resamples + 1):
    no resample was as extreme as the data, and the true p-value is smaller still. None when
    the test is exact (2**n <= n_resamples), whose smallest p-value is a real value."""
    if n <= 0 or (n < 1024 and 2.0**n <= n_resamples):
        return None
    return 2.0 / (n_resamples + 1)


def at_floor(p_value: float, n: int, n_resamples: int) -> bool:
    """Whether `p_value` is the randomized test's floor (reported as "< floor", not a value)."""
    floor = resampling_floor(n, n_resamples)
    return floor is not None and p_value <= floor * (1 + 1e-9)


def holm_levels(p_values: Sequence[float], confidence: float) -> list[float]:
    """The confidence level of each test's Holm step, in the input order: the i-th smallest
    (0-based, ties in input order as in `holm`) of m p-values is tested at alpha / (m - i), so
    its interval is the 1 - (1 - confidence) / (m - i) one."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    levels = [confidence] * m
    for rank, i in enumerate(order):
        levels[i] = 1.0 - (1.0 - confidence) / (m - rank)
    return levels


@dataclass(frozen=True)
class FamilyTest:
    """One test of a Holm family: its result (CI at `ci_level`), the adjusted p-value, and
    whether the CI excludes 0 exactly when the adjusted p-value is below alpha."""

    result: PairedResult
    p_holm: float
    ci_level: float
    ci_agrees: bool

    def to_json(self) -> dict[str, Any]:
        return {**self.result.to_json(), "p_holm": self.p_holm, "ci_level": self.ci_level}


def family_tests(
    pairs: Sequence[tuple[np.ndarray, np.ndarray]], settings: SignificanceSettings
) -> list[FamilyTest]:
    """Paired tests of one family: sign-flip p-values, Holm over all of them, and each
    bootstrap CI at the confidence level of its Holm step (see the module docstring)."""
    p_values = []
    for a, b in pairs:
        x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        p_values.append(_p_value(x, y, settings) if x.size else 1.0)
    adjusted = holm(p_values)
    levels = holm_levels(p_values, settings.confidence)
    out = []
    for (a, b), p, p_holm, level in zip(pairs, p_values, adjusted, levels, strict=True):
        x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        if not x.size:
            result = paired_test(x, y, settings)
        else:
            low, high = _bootstrap_ci(x - y, replace(settings, confidence=level))
            diff = float((x - y).mean())
            result = PairedResult(int(x.size), float(x.mean()), float(y.mean()), diff, low, high, p)
        excludes_zero = result.ci_low > 0 or result.ci_high < 0
        agrees = excludes_zero == (p_holm < settings.alpha)
        out.append(FamilyTest(result, p_holm, level, agrees))
    return out
