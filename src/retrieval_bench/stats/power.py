"""Power of the paired sign-flip test: the smallest difference a comparison can detect, and how
many queries a target difference needs.

The sign-flip test rejects on U = sum(d) / sqrt(sum(d**2)), a monotone function of Student's
t = mean(d) / (sd / sqrt(n)) (t = sqrt(n - 1) U / sqrt(n - U**2)): the two tests order every
sample the same way and differ only in their critical values, and on normal differences the
sign-flip test is as powerful as the one-sample t-test. So the power of a difference delta on n
queries whose differences have standard deviation sd is the t-test's exact power, the
noncentral t distribution's tail (scipy.stats.nct) beyond the t critical value:

    power(delta) = P(T'(n - 1, delta sqrt(n) / sd) > t(n - 1, 1 - a/2))

and the MDE is the delta whose power is `power` (a root of that monotone function), the
queries needed for a difference delta the smallest n whose MDE is at most delta (and at least
the n on which a unanimous difference could reach a at all, `paired.min_p_value`).

Why not the normal approximation: at the per-test alpha of a family (0.05 / 48 on a sweep of
48 tests) the normal tail misstates both the critical value and the spread of sd, and its MDE
gave power 0.88 where 0.80 was stated at n = 30 (0.93 at n = 20); the noncentral t gives
0.80 there, at alpha 0.05 and at n = 147 alike (tests/unit/scoring/test_power.py runs the project's
sign-flip test on simulated differences).

The alpha is the per-test level a test must reach whatever the rest of its family does:
alpha / m for a family of m tests, Holm's first step and BH's first rank (both then reject at
more lenient levels, so the MDE is what the comparison is sure to detect with that power).

Caveat: with many tied queries (d = 0: both systems score a query the same) and few distinct
values, the exact test is discrete and more conservative than the t distribution.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from retrieval_bench.stats.paired import min_p_value

NO_VARIATION = "no variation"


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


def minimum_detectable_effect(sd: float, n: int, alpha_test: float, power: float) -> float | None:
    """The mean difference the sign-flip test detects with `power` on `n` queries whose
    differences have standard deviation `sd` (module docstring); None: no difference could
    be significant on `n` queries (even a unanimous one: 2 / 2**n >= alpha)."""
    if n < 2 or min_p_value(n, 1 << 62) >= alpha_test:
        return None
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


def queries_needed(
    sd: float, delta: float, alpha_test: float, power: float, n_resamples: int
) -> int | None:
    """The smallest number of queries on which a difference `delta` is detected with `power`;
    None when `alpha_test` is below the randomized test's floor 2 / (n_resamples + 1)."""
    if 2.0 / (n_resamples + 1) >= alpha_test:
        return None
    low = 2
    while min_p_value(low, n_resamples) >= alpha_test:
        low += 1

    def enough(n: int) -> bool:
        return t_test_power(delta, sd, n, alpha_test) >= power

    if enough(low):
        return low
    high = low * 2
    while not enough(high):
        low, high = high, high * 2
    while high - low > 1:  # power grows with n: enough(high), not enough(low)
        middle = (low + high) // 2
        if enough(middle):
            high = middle
        else:
            low = middle
    return high


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
    out["mde"] = minimum_detectable_effect(sd, n, alpha_test, power)
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
