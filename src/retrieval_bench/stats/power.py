"""Power of the paired sign-flip test as it is run: the smallest difference a comparison can
detect, and how many queries a target difference needs.

The sign-flip test rejects on U = sum(d) / sqrt(sum(d**2)), a monotone function of Student's
t = mean(d) / (sd / sqrt(n)) (t = sqrt(n - 1) U / sqrt(n - U**2)): the two tests order every
sample the same way and differ only in their critical values, and on normal differences the
sign-flip test with every sign pattern is as powerful as the one-sample t-test. So the power of
a difference delta on n queries whose differences have standard deviation sd, at a two-sided
level a, is the t-test's exact power, the noncentral t distribution's tails (scipy.stats.nct)
beyond the t critical value:

    P_t(delta, a) = P(T' > t(n - 1, 1 - a/2)) + P(T' < -t(n - 1, 1 - a/2)),
    T' ~ T'(n - 1, delta sqrt(n) / sd)

The test as run is not that test, in two ways that matter at a family's per-test alpha
(0.05 / 48 on a sweep of 48 tests), where the t-test's power alone overstated it (0.78 where
0.80 was stated, at n = 30 and at n = 100):

* exact (2**n <= n_resamples): it rejects when at most c* = `paired.rejection_count` of the
  2**n patterns are as extreme as the data, a test of size 2 c* / 2**n <= alpha (the discrete
  levels below alpha): power P_t(delta, 2 c* / 2**n);
* randomized (R = n_resamples random patterns): it rejects when at most K =
  `rejection_count` of the R patterns are as extreme, so a sample whose one-sided p-value is q
  is rejected with probability P(Binomial(R, q) <= K) = P(Q > q), Q ~ Beta(K + 1, R - K).
  The test is the t-test at the random level 2 Q, and its power the t-test's averaged over Q:

      power(delta) = E_Q[P_t(delta, 2 Q)],   Q ~ Beta(K + 1, R - K)

  (Gauss-Legendre in log Q over Q's central 1 - 2e-8, 24 nodes: within 2e-6 of adaptive
  quadrature; `tests/unit/stats/test_power.py` checks it against P(Binomial(R, S(T')) <= K)
  integrated over the noncentral t instead, and against the project's test on simulated
  differences). With R = 10,000 at alpha 0.05 / 48, K = 4: the t-test's own MDE has power
  0.783 there (n = 30), and the MDE stated here is 1.5% larger (1.2% at n = 100).

The MDE is the delta whose power is `power` (a root of that monotone function); the queries
needed for a difference delta the smallest n from which on the power at delta is at least
`power` (at least the n on which a unanimous difference could reach a at all, `detectable`).

Why not the normal approximation: at the per-test alpha of a family the normal tail misstates
both the critical value and the spread of sd: its MDE gave power 0.88 where 0.80 was stated at
n = 30 (0.93 at n = 20).

The alpha is the per-test level a test must reach whatever the rest of its family does:
alpha / m for a family of m tests, Holm's first step and BH's first rank (both then reject at
more lenient levels, so the MDE is what the comparison is sure to detect with that power).

Caveat: with many tied queries (d = 0: both systems score a query the same) and few distinct
values, the exact test is discrete and more conservative than the t distribution.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from retrieval_bench.stats.paired import is_exact, rejection_count

NO_VARIATION = "no variation"
# The quadrature over the resampling's Beta level (module docstring): nodes, and the mass of
# each tail of Q left out.
_NODES = 24
_TAIL = 1e-8


def per_test_alpha(alpha: float, family_size: int) -> float:
    """The level a test of a family of `family_size` must reach alone: alpha / m."""
    return alpha / max(1, family_size)


@functools.lru_cache(maxsize=4096)
def _t_critical(alpha_test: float, df: int) -> float:
    """`scipy.stats.t.ppf(1 - alpha_test / 2, df)`, once per (alpha, df)."""
    from scipy import stats

    return float(stats.t._ppf(1.0 - alpha_test / 2.0, df))


def t_test_power(delta: float, sd: float, n: int, alpha_test: float) -> float:
    """The power of the two-sided level-`alpha_test` test on `n` paired differences of mean
    `delta` and standard deviation `sd` (module docstring: the sign-flip test's, through the
    t statistic it is a monotone function of)."""
    from scipy import stats  # imported here: scipy.stats costs most of an app's start

    df = n - 1
    critical = _t_critical(alpha_test, df)
    shift = delta * math.sqrt(n) / sd
    # The distribution's own `_sf` and `_cdf`: what `stats.nct.sf` and `.cdf` return, without
    # their per-call argument handling (0.36 ms a call; a comparison sizes hundreds of powers).
    upper = float(stats.nct._sf(critical, df, shift))
    lower = float(stats.nct._cdf(-critical, df, shift))
    # scipy's noncentral t gives NaN far in a tail: there the tail is 0 (or all, above).
    if math.isnan(upper):
        upper = 1.0 if shift > critical else 0.0
    return upper + (0.0 if math.isnan(lower) else lower)


@functools.lru_cache(maxsize=256)
def _resampling_levels(count: int, n_resamples: int) -> tuple[np.ndarray, np.ndarray]:
    """The two-sided levels 2 Q at which a randomized test rejecting at most `count` of
    `n_resamples` patterns is the t-test, Q ~ Beta(count + 1, R - count), and their weights:
    Gauss-Legendre nodes in log Q over Q's central 1 - 2 `_TAIL` (module docstring)."""
    from scipy import stats

    a, b = count + 1, n_resamples - count
    low = math.log(float(stats.beta.ppf(_TAIL, a, b)))
    high = math.log(float(stats.beta.isf(_TAIL, a, b)))
    x, w = np.polynomial.legendre.leggauss(_NODES)
    log_q = low + (x + 1.0) * (high - low) / 2.0
    q = np.exp(log_q)
    weights = w * np.exp(stats.beta.logpdf(q, a, b) + log_q)
    levels = np.minimum(2.0 * q, 1.0)
    levels.setflags(write=False)
    return levels, weights / weights.sum()


@functools.lru_cache(maxsize=1024)
def _resampling_criticals(count: int, n_resamples: int, df: int) -> np.ndarray:
    """The t critical value of each level of `_resampling_levels`."""
    from scipy import stats

    levels, _ = _resampling_levels(count, n_resamples)
    criticals = np.asarray(stats.t._ppf(1.0 - levels / 2.0, df), dtype=np.float64)
    criticals.setflags(write=False)
    return criticals


def _t_powers(delta: float, sd: float, n: int, criticals: np.ndarray) -> np.ndarray:
    """`t_test_power` at each of `criticals` (the two-sided critical values of n - 1 df).

    The power is even in delta, so it is taken at |delta|; the far tail (below -critical) is
    added only where it can reach 1e-9, far below the quadrature's error (most calls are
    near an MDE, where it is smaller, and computing it would double their cost)."""
    from scipy import stats

    df = n - 1
    shift = abs(delta) * math.sqrt(n) / sd
    upper = np.asarray(stats.nct._sf(criticals, df, shift), dtype=np.float64)
    # As in t_test_power: NaN far in a tail is 0 (or all, above).
    upper = np.where(np.isnan(upper), np.where(shift > criticals, 1.0, 0.0), upper)
    widest = float(stats.nct._cdf(-float(criticals.min()), df, shift))
    if math.isnan(widest) or widest < 1e-9:
        return upper
    lower = np.asarray(stats.nct._cdf(-criticals, df, shift), dtype=np.float64)
    return upper + np.nan_to_num(lower, nan=0.0)


def sign_flip_power(
    delta: float, sd: float, n: int, alpha_test: float, n_resamples: int
) -> float:
    """The power of the project's two-sided sign-flip test at `alpha_test`, with its
    `n_resamples`, on `n` paired differences of mean `delta` and sd `sd` (module docstring:
    exact, the t-test at the largest level the patterns allow; randomized, the t-test averaged
    over the resampling's Beta level). 0 where the test can reject nothing."""
    count = rejection_count(n, n_resamples, alpha_test)
    if is_exact(n, n_resamples):
        return t_test_power(delta, sd, n, 2.0 * count / 2.0**n) if count >= 1 else 0.0
    if count < 0:
        return 0.0
    _, weights = _resampling_levels(count, n_resamples)
    criticals = _resampling_criticals(count, n_resamples, n - 1)
    return float(weights @ _t_powers(delta, sd, n, criticals))


def detectable(n: int, alpha_test: float, n_resamples: int) -> bool:
    """Whether any difference could be significant on `n` queries: the test can reject at
    `alpha_test` (even a unanimous difference cannot when 2 / 2**n or 2 / (R + 1) >= alpha)."""
    if n < 2:
        return False
    smallest = 1 if is_exact(n, n_resamples) else 0
    return rejection_count(n, n_resamples, alpha_test) >= smallest


def _t_test_mde(sd: float, n: int, alpha_test: float, power: float) -> float:
    """The t-test's own MDE at level `alpha_test` (where the search for the test's starts)."""
    from scipy import optimize  # as scipy.stats above

    high = sd / math.sqrt(n)
    while t_test_power(high, sd, n, alpha_test) < power:
        high *= 2.0
    return float(
        optimize.brentq(
            lambda delta: t_test_power(delta, sd, n, alpha_test) - power,
            0.0,
            high,
            xtol=1e-12 * sd,
            rtol=1e-12,
        )
    )


def minimum_detectable_effect(
    sd: float, n: int, alpha_test: float, power: float, n_resamples: int
) -> float | None:
    """The mean difference the sign-flip test, as run with `n_resamples`, detects with `power`
    on `n` queries whose differences have standard deviation `sd` (module docstring); None: no
    difference could be significant on `n` queries (`detectable`). Solved to 1e-9 sd, well
    within the quadrature's error."""
    if not detectable(n, alpha_test, n_resamples):
        return None
    count = rejection_count(n, n_resamples, alpha_test)
    if is_exact(n, n_resamples):
        return _t_test_mde(sd, n, 2.0 * count / 2.0**n, power)
    from scipy import optimize  # as scipy.stats above

    def gap(delta: float) -> float:
        return sign_flip_power(delta, sd, n, alpha_test, n_resamples) - power

    # The resampling costs a few percent of power, so the root is just above the t-test's MDE
    # at alpha: the bracket grows from there (each evaluation integrates over the level).
    low = high = _t_test_mde(sd, n, alpha_test, power)
    while gap(low) > 0:
        low /= 1.03
    while gap(high) < 0:
        low, high = high, high * 1.03
    if low == high:
        return low
    return float(optimize.brentq(gap, low, high, xtol=1e-9 * sd, rtol=1e-9))


def queries_needed(
    sd: float, delta: float, alpha_test: float, power: float, n_resamples: int
) -> int | None:
    """The smallest number of queries from which on a difference `delta` is detected with
    `power` by the test as run; None when `alpha_test` is below the randomized test's floor
    2 / (n_resamples + 1) (no number is enough).

    Power grows with n within each regime, but not across the step from the exact test
    (2**n <= R) to the randomized one, which loses power to the resampling: so the randomized
    regime is searched first, from a guess (the t-test's answer for the power plus what the
    resampling loses there), then the answer is extended down through the exact regime while
    the power holds."""
    if 2.0 / (n_resamples + 1) >= alpha_test:
        return None
    low = 2
    while not detectable(low, alpha_test, n_resamples):
        low += 1

    def enough(n: int) -> bool:
        return sign_flip_power(delta, sd, n, alpha_test, n_resamples) >= power

    first_random = max(low, next(n for n in range(1, 64) if not is_exact(n, n_resamples)))
    # The t-test at alpha is at least as powerful: fewer queries than it needs never suffice.
    floor = _t_test_queries(sd, delta, alpha_test, power, first_random)
    loss = t_test_power(delta, sd, floor, alpha_test) - sign_flip_power(
        delta, sd, floor, alpha_test, n_resamples
    )
    guess = _t_test_queries(sd, delta, alpha_test, min(power + max(loss, 0.0), 1 - 1e-9), floor)
    high = _smallest_enough(enough, floor, guess)
    if high == first_random:
        while high - 1 >= low and enough(high - 1):
            high -= 1
    return high


def _smallest_enough(enough: Callable[[int], bool], floor: int, guess: int) -> int:
    """The smallest n >= `floor` for which `enough(n)` (true from some n on), searched by
    galloping from `guess` toward the answer, then bisecting."""
    if enough(guess):
        high, step = guess, 1
        while high - step >= floor and enough(high - step):
            high, step = high - step, step * 2
        low = max(floor - 1, high - step)
    else:
        low, step = guess, 1
        while not enough(low + step):
            low, step = low + step, step * 2
        high = low + step
    while high - low > 1:  # enough(high); not enough(low), or low below floor
        middle = (low + high) // 2
        if enough(middle):
            high = middle
        else:
            low = middle
    return high


def _t_test_queries(sd: float, delta: float, alpha_test: float, power: float, low: int) -> int:
    """The smallest n >= `low` on which the t-test at `alpha_test` reaches `power` (power
    grows with n), searched from the normal approximation's ((z_a/2 + z_b) sd / delta)**2."""
    from scipy.special import ndtri

    def enough(n: int) -> bool:
        return t_test_power(delta, sd, n, alpha_test) >= power

    normal = ((ndtri(1 - alpha_test / 2) + ndtri(power)) * sd / abs(delta)) ** 2
    guess = max(low, min(math.ceil(normal) if math.isfinite(normal) else low, 1 << 40))
    return _smallest_enough(enough, low, guess)


def power_entry(
    d: np.ndarray, alpha_test: float, power: float, target_delta: float, n_resamples: int
) -> dict[str, Any]:
    """The power of one paired test from its per-query differences `d` (a - b): the sd of d
    (ddof 1), the MDE on these n queries and the queries needed for `target_delta`. A difference
    the same on every query (sd 0; identical systems when it is 0) has "no variation": no
    sd to size anything by."""
    n = int(d.size)
    out: dict[str, Any] = {"alpha_test": alpha_test, "sd": None, "mde": None, "n_needed": None}
    if n < 2:
        out["note"] = "fewer than 2 queries: no sd"
        return out
    sd = float(np.std(d, ddof=1))
    out["sd"] = sd
    if sd == 0.0:
        out["note"] = NO_VARIATION
        return out
    out["mde"] = minimum_detectable_effect(sd, n, alpha_test, power, n_resamples)
    out["n_needed"] = queries_needed(sd, target_delta, alpha_test, power, n_resamples)
    if out["n_needed"] is None:
        out["note"] = f"alpha/m {alpha_test:.2g} is below the resampling floor: raise n_resamples"
    elif out["mde"] is None:
        out["note"] = f"no difference detectable on {n} queries"
    else:
        out["note"] = ""
    return out


def summary(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """A cell's power from its tests: the largest MDE and n needed (what every comparison of
    the cell needs); "no variation" when no test varied."""
    varied = [e for e in entries if e.get("note") != NO_VARIATION]
    if not entries or not varied:
        return {"mde": None, "n_needed": None, "note": NO_VARIATION if entries else ""}
    worst = max(varied, key=lambda e: (e["n_needed"] is None, e["n_needed"] or 0))
    mdes = [e["mde"] for e in varied]
    return {
        "mde": None if None in mdes else max(mdes),
        "n_needed": worst["n_needed"],
        "note": worst["note"],
    }


def paired_counts(a: np.ndarray, reference: np.ndarray) -> dict[str, int]:
    """PyTerrier's per-query counts against a reference (its baseline): queries where `a` is
    above it (improved), below (degraded) and equal (unchanged)."""
    return {
        "improved": int(np.count_nonzero(a > reference)),
        "degraded": int(np.count_nonzero(a < reference)),
        "unchanged": int(np.count_nonzero(a == reference)),
    }
