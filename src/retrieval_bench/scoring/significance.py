"""Paired significance for two systems scored on the same queries.

Why paired: queries differ far more in difficulty than systems do, so the signal is in the
per-query differences d = a - b, not in two independent means.

The test is the paired randomization (sign-flip) test of mean(d), two-sided: under "no
difference" each query's two values could be swapped, i.e. each d_i's sign flipped. It is exact
(all 2**n sign patterns) when 2**n <= n_resamples, else `n_resamples` seeded random patterns,
with scipy's estimator: p = 2 min(#{T* >= T} + 1, #{T* <= T} + 1) / (R + 1) (no +1 when exact),
so it gives `scipy.stats.permutation_test(..., permutation_type="samples")`'s p-value on the
same patterns (the tests check it against scipy's exact test).

The confidence interval is that same test inverted: every shift delta for which the test of
mean(d - delta) = 0 does not reject, computed exactly from the sign patterns (`SignFlip`). So an
interval excludes 0 exactly when the p-value is below 1 - its confidence level: the CI and the
verdict cannot contradict each other, which a bootstrap CI (a different resampling, narrower by
construction when the mean is not 0) printed beside a randomization p-value did. scipy offers no
test inversion, hence the few lines of numpy here; the patterns are drawn once per comparison,
so every shift is tested on the same ones.

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

Everything is seeded (`seed`), so a report is reproducible bit for bit.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from retrieval_bench.config.compare import CORRECTIONS, CompareConfig
from retrieval_bench.io import json_number


@dataclass(frozen=True)
class SignificanceSettings:
    """How every paired comparison in a report is tested; echoed into the report."""

    alpha: float = 0.05
    n_resamples: int = 10000
    confidence: float = 0.95
    seed: int = 0
    # Multiple-testing correction of a family: "holm" or "bh" (`CORRECTIONS`).
    correction: str = "holm"
    # Power analysis (`scoring.power`): the power a minimum detectable effect is stated at,
    # and the difference the "queries needed" are for.
    power: float = 0.8
    target_delta: float = 0.05


def significance_settings(cfg: CompareConfig) -> SignificanceSettings:
    """The settings of a `compare:` node (every comparison, and a job's robustness tests)."""
    return SignificanceSettings(
        alpha=cfg.alpha,
        n_resamples=cfg.n_resamples,
        confidence=cfg.confidence,
        seed=cfg.seed,
        correction=cfg.correction,
        power=cfg.power,
        target_delta=cfg.target_delta,
    )


# Written for a CI end no shift can reach (JSON null, markdown `unbounded`).
UNBOUNDED = "unbounded: too few queries"


def ci_json(low: float, high: float) -> dict[str, Any]:
    """A CI as strict JSON: an infinite end (no shift could be rejected) is null, and
    `ci_unbounded` says why."""
    out: dict[str, Any] = {"ci_low": json_number(low), "ci_high": json_number(high)}
    if math.isinf(low) or math.isinf(high):
        out["ci_unbounded"] = UNBOUNDED
    return out


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

    def to_json(self) -> dict[str, Any]:
        """Strict JSON: NaN means (no query) and infinite CI ends are null (`ci_json`)."""
        out: dict[str, Any] = {
            k: json_number(v) if isinstance(v, float) else v for k, v in asdict(self).items()
        }
        return {**out, **ci_json(self.ci_low, self.ci_high)}


# Rows of sign patterns generated at a time (bounds memory on large n).
_CHUNK_ELEMENTS = 1 << 22


class SignFlip:
    """The sign-flip test of mean(d) = delta, for every delta at once.

    For pattern r, T*_r(delta) - T(delta) = A_r - delta * B_r with A_r = mean(s_r d) - mean(d)
    and B_r = mean(s_r) - 1 <= 0, both fixed; so #{T* >= T} only grows with delta and
    #{T* <= T} only shrinks, the p-value is a step function whose acceptance region is an
    interval, and its ends are order statistics of the breakpoints A_r / B_r.
    """

    def __init__(self, d: np.ndarray, n_resamples: int, seed: int) -> None:
        n = int(d.size)
        self.mean = float(d.mean())
        self.exact = _exact(n, n_resamples)
        parts_a, parts_b = [], []
        for signs in self._patterns(n, n_resamples, seed):
            parts_a.append(signs @ d / n)
            parts_b.append(signs.sum(axis=1) / n)
        sums, counts = np.concatenate(parts_a), np.concatenate(parts_b)
        self.total = int(sums.size)
        self.a = sums - self.mean
        self.b = counts - 1.0
        # Ties (T* == T) are counted on both sides, within a rounding tolerance.
        self.tol = 1e-12 * (float(np.abs(d).mean()) + abs(self.mean) + 1e-300)
        flat = self.b == 0  # the all-plus pattern: T* == T whatever delta
        self.flat_ge = int(np.count_nonzero(self.a[flat] >= -self.tol))
        self.flat_le = int(np.count_nonzero(self.a[flat] <= self.tol))
        slope = self.b[~flat]
        # #{T* >= T} counts the patterns with delta >= lower_r; #{T* <= T} those with
        # delta <= upper_r.
        self.lower = np.sort((self.a[~flat] + self.tol) / slope)
        self.upper = np.sort((self.a[~flat] - self.tol) / slope)
        # The same breakpoints without the tolerance, as reported (rounded off float noise).
        self.breaks = np.sort(self.a[~flat] / slope)

    @staticmethod
    def _patterns(n: int, n_resamples: int, seed: int) -> Iterator[np.ndarray]:
        """Every sign pattern (exact), else `n_resamples` seeded random ones, in chunks."""
        rows = max(1, _CHUNK_ELEMENTS // n)
        exact = _exact(n, n_resamples)
        if (2**n if exact else n_resamples) <= rows:  # one chunk (at most 32 MB): kept
            yield _kept_patterns(n, n_resamples, seed)
            return
        if exact:
            yield _one_chunk_of_patterns(n, n_resamples, seed)
            return
        rng = np.random.default_rng(seed)
        for start in range(0, n_resamples, rows):
            size = min(rows, n_resamples - start)
            yield rng.choice(np.array([-1.0, 1.0]), size=(size, n))

    def _counts(self, delta: float) -> tuple[int, int]:
        ge = self.flat_ge + int(np.searchsorted(self.lower, delta, side="right"))
        le = self.flat_le + int(self.upper.size - np.searchsorted(self.upper, delta, side="left"))
        return ge, le

    def p_value(self, delta: float = 0.0) -> float:
        """Two-sided p-value of mean(d) = delta."""
        ge, le = self._counts(delta)
        extra = 0 if self.exact else 1
        return min(1.0, 2.0 * (min(ge, le) + extra) / (self.total + extra))

    def interval(self, confidence: float) -> tuple[float, float]:
        """Every delta the test does not reject at 1 - confidence (p >= 1 - confidence);
        +-inf where no shift, however large, could be rejected (too few queries)."""
        extra = 0 if self.exact else 1
        need = math.ceil((1.0 - confidence) * (self.total + extra) / 2.0 - extra - 1e-9)
        # p >= 1 - confidence  <=>  both counts >= need.
        k_low, k_high = need - self.flat_ge, need - self.flat_le
        low = -math.inf if k_low <= 0 else _clean(self.breaks[k_low - 1])
        high = math.inf if k_high <= 0 else _clean(self.breaks[self.breaks.size - k_high])
        return low, high


def _exact(n: int, n_resamples: int) -> bool:
    """Whether every sign pattern of n is tested: there are no more than `n_resamples`."""
    return n < 63 and 2**n <= n_resamples


def _one_chunk_of_patterns(n: int, n_resamples: int, seed: int) -> np.ndarray:
    """Every sign pattern of n (exact), else `n_resamples` seeded random ones, in one array."""
    if _exact(n, n_resamples):
        codes = np.arange(2**n, dtype=np.int64)[:, None]
        return (1 - 2 * ((codes >> np.arange(n)) & 1)).astype(np.float64)
    rng = np.random.default_rng(seed)
    return rng.choice(np.array([-1.0, 1.0]), size=(n_resamples, n))


@functools.lru_cache(maxsize=8)
def _kept_patterns(n: int, n_resamples: int, seed: int) -> np.ndarray:
    """`_one_chunk_of_patterns` made once per process where it fits in one chunk (32 MB):
    every test of a comparison on the same n queries draws the same patterns (the same seed),
    and drawing them was most of each test's time (`python -m cProfile -s tottime -m run -m
    experiment=robustness`: 1.24 s in `_patterns` over its 672 tests before). Read-only: every
    test shares it."""
    patterns = _one_chunk_of_patterns(n, n_resamples, seed)
    patterns.setflags(write=False)
    return patterns


def _clean(value: float) -> float:
    """A breakpoint without float noise (1e-17 -> 0.0, never -0.0)."""
    return round(float(value), 12) + 0.0


def paired_test(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    settings: SignificanceSettings = SignificanceSettings(),
) -> PairedResult:
    """Sign-flip p-value of mean(a - b) and its CI at `settings.confidence` (the test
    inverted, see the module docstring), over paired values."""
    return _paired(a, b, settings)[0]


def _paired(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    settings: SignificanceSettings,
) -> tuple[PairedResult, SignFlip | None]:
    """The result (CI at `settings.confidence`) and its test, for other levels (None: n = 0)."""
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"paired samples need equal 1-d shapes, got {x.shape} and {y.shape}")
    n = int(x.size)
    if n == 0:
        nan = math.nan
        return PairedResult(0, nan, nan, nan, nan, nan, 1.0), None
    test = SignFlip(x - y, settings.n_resamples, settings.seed)
    p = test.p_value()
    low, high = test.interval(settings.confidence)
    return PairedResult(n, float(x.mean()), float(y.mean()), test.mean, low, high, p), test


def min_p_value(n: int, n_resamples: int) -> float:
    """The smallest two-sided p-value the sign-flip test can return on `n` pairs.

    Exact: the observed signs and their mirror image always count, so 2 / 2**n. Randomized
    (2**n > n_resamples): the estimator counts the observed statistic, so 2 / (n_resamples + 1)
    (`resampling_floor`).
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
    if n <= 0 or _exact(n, n_resamples):
        return None
    return 2.0 / (n_resamples + 1)


def at_floor(p_value: float, n: int, n_resamples: int) -> bool:
    """Whether `p_value` is the randomized test's floor (reported as "< floor", not a value)."""
    floor = resampling_floor(n, n_resamples)
    return floor is not None and p_value <= floor * (1 + 1e-9)


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
    pairs: Sequence[tuple[np.ndarray, np.ndarray]], settings: SignificanceSettings
) -> list[FamilyTest]:
    """Paired tests of one family: sign-flip p-values, adjusted together by
    `settings.correction`, and each CI at the matching level (see the module docstring)."""
    tests = [_paired(a, b, settings) for a, b in pairs]
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
    return out
