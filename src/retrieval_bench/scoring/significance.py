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
"""

from __future__ import annotations

import inspect
import math
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass

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
    d = x - y
    diff = float(d.mean())
    mean_a, mean_b = float(x.mean()), float(y.mean())
    if np.all(d == d[0]):
        # Every query moved by the same amount: no resampling can vary it. A constant non-zero
        # shift is as one-sided as data gets; its p-value is the smallest the sign-flip test
        # can give, computed exactly rather than by a degenerate resampling.
        p = 1.0 if d[0] == 0 else min(1.0, min_p_value(n, settings.n_resamples))
        return PairedResult(n, mean_a, mean_b, diff, diff, diff, p)
    rng = np.random.default_rng(settings.seed)
    perm = stats.permutation_test(
        (x, y),
        _mean_diff,
        permutation_type="samples",
        vectorized=True,
        n_resamples=settings.n_resamples,
        alternative="two-sided",
        **{_RNG_KW: rng},
    )
    low, high = _bootstrap_ci(d, settings)
    return PairedResult(n, mean_a, mean_b, diff, low, high, float(min(1.0, perm.pvalue)))


def _bootstrap_ci(d: np.ndarray, settings: SignificanceSettings) -> tuple[float, float]:
    if d.size < 2:
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
