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

A family of such tests is adjusted together in `stats.corrections`.

Everything is seeded (`seed`), so a report is reproducible bit for bit.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from retrieval_bench.io.strict_json import json_number
from retrieval_bench.stats.settings import SignificanceSettings

# The settings a test is run at when its caller gives none (frozen: shared safely).
DEFAULT_SETTINGS = SignificanceSettings()

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


@functools.cache
def _blas_pools() -> Any:
    """The BLAS libraries loaded (numpy's, scipy's), found once: threadpoolctl scans the
    process's libraries (1.5 ms), and a comparison makes hundreds of tests."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def _one_blas_thread() -> Any:
    """The sign patterns times the differences (`signs @ d`) on one BLAS thread. A comparison
    makes hundreds of these products, each a fraction of a millisecond: OpenBLAS's other
    threads woke for each one and spun between them, about 0.3 CPU s per comparison of the
    travel set for no wall time on two cores (BENCHMARKS.md, "Tracking", third session), work
    that competes with whatever else runs. One thread also makes the sums' last bits the same
    whatever the machine's core count (a different count split them differently, ~1e-17)."""
    return _blas_pools().limit(limits=1, user_api="blas")


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
        self.exact = is_exact(n, n_resamples)
        parts_a, parts_b = [], []
        with _one_blas_thread():
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
        exact = is_exact(n, n_resamples)
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
        return p_value_of_count(min(ge, le), self.total, self.exact)

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


def is_exact(n: int, n_resamples: int) -> bool:
    """Whether every sign pattern of n is tested: there are no more than `n_resamples`."""
    return n < 63 and 2**n <= n_resamples


def p_value_of_count(count: int, total: int, exact: bool) -> float:
    """The two-sided p-value when the smaller of #{T* >= T} and #{T* <= T} over `total`
    patterns is `count`: 2 count / 2**n (exact, the observed pattern among those counted), or
    scipy's 2 (count + 1) / (R + 1) (R random patterns)."""
    extra = 0 if exact else 1
    return min(1.0, 2.0 * (count + extra) / (total + extra))


def rejection_count(n: int, n_resamples: int, alpha: float) -> int:
    """The largest count (the smaller of #{T* >= T} and #{T* <= T}) at which the test on `n`
    pairs rejects at `alpha` (p < alpha). Below the smallest count there can be (1 exact: the
    observed pattern; 0 randomized) when it rejects nothing at alpha. What the test's power
    rests on (`stats.power`): a randomized test with R patterns rejects only when at most
    this many of them are as extreme as the data, however small the true p-value."""
    exact = is_exact(n, n_resamples)
    total = 2**n if exact else n_resamples
    smallest = 1 if exact else 0
    # p rises with the count: start at the count alpha asks for, step to the last one below.
    count = max(smallest - 1, math.floor(alpha * (total + (0 if exact else 1)) / 2.0) + 1)
    while count >= smallest and not p_value_of_count(count, total, exact) < alpha:
        count -= 1
    while p_value_of_count(count + 1, total, exact) < alpha:
        count += 1
    return count


def _one_chunk_of_patterns(n: int, n_resamples: int, seed: int) -> np.ndarray:
    """Every sign pattern of n (exact), else `n_resamples` seeded random ones, in one array."""
    if is_exact(n, n_resamples):
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
    settings: SignificanceSettings = DEFAULT_SETTINGS,
) -> PairedResult:
    """Sign-flip p-value of mean(a - b) and its CI at `settings.confidence` (the test
    inverted, see the module docstring), over paired values."""
    return paired_sign_flip(a, b, settings)[0]


def paired_sign_flip(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    settings: SignificanceSettings,
) -> tuple[PairedResult, SignFlip | None]:
    """The result (CI at `settings.confidence`) and its test, for intervals at other levels
    (`stats.corrections`; None: n = 0)."""
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


def resampling_floor(n: int, n_resamples: int) -> float | None:
    """The smallest p-value the randomized test reports on `n` pairs, 2 / (n_resamples + 1):
    no resample was as extreme as the data, and the true p-value is smaller still. None when
    the test is exact (2**n <= n_resamples), whose smallest p-value is a real value."""
    if n <= 0 or is_exact(n, n_resamples):
        return None
    return 2.0 / (n_resamples + 1)


def at_floor(p_value: float, n: int, n_resamples: int) -> bool:
    """Whether `p_value` is the randomized test's floor (reported as "< floor", not a value)."""
    floor = resampling_floor(n, n_resamples)
    return floor is not None and p_value <= floor * (1 + 1e-9)
