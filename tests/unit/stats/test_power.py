"""Power and minimum detectable effects (`stats.power`), PyTerrier's +/-/= counts, and the BH
correction with intervals that agree with its verdicts.

Independent code: the project's own sign-flip test on simulated differences (power), scipy's
`false_discovery_control` (BH).
"""

from __future__ import annotations

import numpy as np
import pytest
from support.references import scipy_stats_power

from retrieval_bench.stats.corrections import bh, bh_levels, family_tests
from retrieval_bench.stats.paired import SignFlip
from retrieval_bench.stats.power import (
    _t_test_mde,
    minimum_detectable_effect,
    paired_counts,
    power_entry,
    queries_needed,
    sign_flip_power,
    t_test_power,
)
from retrieval_bench.stats.settings import SignificanceSettings
from retrieval_bench.stats.verdicts import delta_cells, verdict_cell, verdict_cells


def _values(**columns: list[float]) -> dict[str, dict[str, float]]:
    return {label: {f"q{i:02d}": float(v) for i, v in enumerate(c)} for label, c in columns.items()}


# --- 1. power ---------------------------------------------------------------------------


def _resampled_power(delta: float, sd: float, n: int, alpha: float, n_resamples: int) -> float:
    """The power of the randomized sign-flip test by another route than `stats.power`'s: given
    the data, a test with R random patterns rejects when at most K of them are as extreme
    (K the largest count whose p-value 2 (K + 1) / (R + 1) is below alpha, found by hand
    here), i.e. with probability P(Binomial(R, S(t)) <= K) on the side of t, S the t
    distribution's tail (the sign-flip test orders samples as the t statistic does); averaged
    over the noncentral t the statistic follows (scipy's quad, its pdf and binom.cdf)."""
    import math

    from scipy import integrate, stats

    count = 0
    while 2.0 * (count + 2) / (n_resamples + 1) < alpha:
        count += 1
    df, shift = n - 1, delta * math.sqrt(n) / sd

    def rejected(t: float) -> float:
        upper = stats.binom.cdf(count, n_resamples, stats.t.sf(t, df))
        lower = stats.binom.cdf(count, n_resamples, stats.t.cdf(t, df))
        return float(stats.nct.pdf(t, df, shift) * (upper + lower))

    critical = float(stats.t.isf(alpha / 2, df))
    return float(
        integrate.quad(rejected, shift - 30, shift + 30, points=[-critical, critical, shift],
                       limit=200, epsabs=1e-9)[0]
    )  # fmt: skip


def test_the_power_of_the_test_as_run_averages_the_t_test_over_the_resampling() -> None:
    # The cases (a sweep's per-test alpha 0.05 / 48, the default 10,000 resamples, at
    # n = 30 and 100): the project's power equals the other route's to the quadrature's
    # precision, so the MDE has the stated power under the test as run. The t-test's own MDE
    # (what was stated before) has 0.783 there, not 0.8.
    alpha = 0.05 / 48
    for n in (30, 100):
        mde = minimum_detectable_effect(1.0, n, alpha, 0.8, 10_000)
        assert mde is not None and mde > _t_test_mde(1.0, n, alpha, 0.8)
        assert sign_flip_power(mde, 1.0, n, alpha, 10_000) == pytest.approx(0.8, abs=1e-6)
        assert _resampled_power(mde, 1.0, n, alpha, 10_000) == pytest.approx(0.8, abs=1e-5)
    t_mde = _t_test_mde(1.0, 30, alpha, 0.8)
    assert _resampled_power(t_mde, 1.0, 30, alpha, 10_000) == pytest.approx(0.7833, abs=1e-4)


def test_the_mde_follows_the_resample_count_and_the_exact_tests_levels() -> None:
    alpha = 0.05 / 48
    # Fewer resamples, less power at the same difference, so a larger MDE; very many: the
    # t-test's own MDE.
    mdes = [minimum_detectable_effect(1.0, 30, alpha, 0.8, r) for r in (2_000, 10_000, 10**7)]
    assert mdes[0] > mdes[1] > mdes[2]  # type: ignore[operator]
    assert mdes[2] == pytest.approx(_t_test_mde(1.0, 30, alpha, 0.8), rel=2e-4)
    # Below the randomized test's floor 2 / (R + 1) nothing is detectable, at any n.
    assert minimum_detectable_effect(1.0, 30, 1e-4, 0.8, 10_000) is None
    assert minimum_detectable_effect(1.0, 30, 1e-4, 0.8, 100_000) is not None
    # Exact (2**10 <= 10,000): it rejects when at most 25 of the 1024 patterns are as extreme
    # (2 x 25 / 1024 < 0.05 <= 2 x 26 / 1024), a test of size 50 / 1024: the t-test's power
    # at that level.
    exact = minimum_detectable_effect(1.0, 10, 0.05, 0.8, 10_000)
    assert exact is not None
    assert t_test_power(exact, 1.0, 10, 50 / 1024) == pytest.approx(0.8, abs=1e-9)
    assert sign_flip_power(0.7, 1.0, 10, 0.05, 10_000) == t_test_power(0.7, 1.0, 10, 50 / 1024)


def _sign_flip_p_values(d: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    """The p-value of `SignFlip(d[:, j], n_resamples, seed)` for every column j at once: one
    seed draws the same sign patterns for every column (as SignFlip draws them), so each
    column's p-value is the project's test's (checked below on the first columns)."""
    n = d.shape[0]
    signs = np.random.default_rng(seed).choice(np.array([-1.0, 1.0]), size=(n_resamples, n))
    observed = d.mean(axis=0)
    tol = 1e-12 * (np.abs(d).mean(axis=0) + np.abs(observed))
    out = np.empty(d.shape[1])
    for start in range(0, d.shape[1], 500):
        block = slice(start, start + 500)
        resampled = signs @ d[:, block] / n
        ge = np.count_nonzero(resampled >= observed[block] - tol[block], axis=0)
        le = np.count_nonzero(resampled <= observed[block] + tol[block], axis=0)
        out[block] = np.minimum(1.0, 2.0 * (np.minimum(ge, le) + 1) / (n_resamples + 1))
    return out


@pytest.mark.slow  # 6,000 simulated comparisons of 10,000 resamples each (~3-5 s)
@pytest.mark.parametrize("n", [30, 100])
def test_the_mde_gives_the_stated_power_on_the_projects_sign_flip_test(n: int) -> None:
    # The travel sweep's family: 48 tests, so a cell is tested at 0.05 / 48, with the
    # default 10,000 resamples. Differences with sd 1 and mean = the MDE at power 0.8: the
    # share of simulated comparisons the project's test rejects is its power. 6,000
    # simulations: the binomial sd of the share is 0.0052, so 0.80 +/- 0.02 is 3.8 sd. (The
    # t-test's MDE gave 0.773 +/- 0.015 at n = 30 and 0.764 at n = 100 in the issue's
    # simulation; 0.781 and 0.786 in 40,000 draws each.)
    alpha, resamples = 0.05 / 48, 10_000
    mde = minimum_detectable_effect(1.0, n, alpha, 0.8, resamples)
    assert mde is not None
    d = np.random.default_rng(48 + n).normal(mde, 1.0, size=(n, 6000))
    p = _sign_flip_p_values(d, resamples, seed=3)
    for j in range(3):  # the vectorised p-values are SignFlip's
        assert p[j] == SignFlip(d[:, j], resamples, 3).p_value()
    share = float(np.mean(p < alpha))
    assert abs(share - 0.8) <= 0.02


def test_mde_and_queries_needed_exact_values() -> None:
    # The one-sample t-test's power (noncentral t), which the sign-flip test shares: a
    # standardised difference of 0.5 at alpha 0.05 needs 34 queries (power 0.808; 33 give
    # 0.795), as power tables (G*Power, Cohen 1988) list it; with 10,000 resamples (K = 249
    # of them, 2 x 250 / 10,001 < 0.05) the test loses less than 0.001 of that.
    assert queries_needed(1.0, 0.5, 0.05, 0.8, 10_000) == 34
    assert t_test_power(0.5, 1.0, 34, 0.05) == pytest.approx(0.8078, abs=1e-4)
    assert sign_flip_power(0.5, 1.0, 34, 0.05, 10_000) == pytest.approx(0.8075, abs=1e-4)
    # The MDE is the difference with exactly the stated power; it scales with sd.
    mde = minimum_detectable_effect(0.3, 30, 0.05, 0.8, 10_000)
    assert mde is not None
    assert sign_flip_power(mde, 0.3, 30, 0.05, 10_000) == pytest.approx(0.8, abs=1e-8)
    assert minimum_detectable_effect(1.0, 30, 0.05, 0.8, 10_000) == pytest.approx(
        mde / 0.3, rel=1e-8
    )
    # 3 queries: even a unanimous difference has p = 2/8 >= 0.05, nothing is detectable.
    assert minimum_detectable_effect(0.3, 3, 0.05, 0.8, 10_000) is None
    # The queries needed are the smallest n whose MDE is at most the target.
    n = queries_needed(0.3, 0.05, 0.05, 0.8, 10_000)
    assert n is not None
    assert minimum_detectable_effect(0.3, n, 0.05, 0.8, 10_000) <= 0.05  # type: ignore[operator]
    assert minimum_detectable_effect(0.3, n - 1, 0.05, 0.8, 10_000) > 0.05  # type: ignore[operator]
    # A little above the textbook ((z_a + z_b) sd / delta)^2 = 282.6.
    assert n == 285
    # At a family's alpha the resampling costs queries: 0.05 / 48 with 10,000 resamples
    # needs more than the t-test would.
    needed = queries_needed(0.3, 0.05, 0.05 / 48, 0.8, 10_000)
    assert needed is not None
    assert sign_flip_power(0.05, 0.3, needed, 0.05 / 48, 10_000) >= 0.8
    assert sign_flip_power(0.05, 0.3, needed - 1, 0.05 / 48, 10_000) < 0.8
    assert t_test_power(0.05, 0.3, needed - 1, 0.05 / 48) >= 0.8
    # alpha / m below the randomized test's floor 2 / 10001: no n is enough.
    assert queries_needed(0.3, 0.05, 1e-4, 0.8, 10_000) is None
    # A huge difference: n is at least what a unanimous difference needs (2/2**n < alpha).
    assert queries_needed(0.01, 0.5, 0.05, 0.8, 10_000) == 6


def test_power_equals_scipy_stats_to_the_last_bit() -> None:
    # power.py calls the distributions' _ppf, _sf and _cdf, not stats.t.ppf, nct.sf and .cdf
    # (13x faster a power entry: benchmarks/bench_power.py); every value must be the public
    # API's, far tails included.
    rng = np.random.default_rng(1)
    for _ in range(400):
        n = int(rng.integers(2, 400))
        alpha = float(rng.choice([0.05, 0.05 / 48, 0.01, 1e-4, 0.05 / 7]))
        sd = float(rng.uniform(0.001, 0.6))
        delta = float(rng.normal(0, 0.3)) * float(rng.choice([1, 10, 100]))
        assert t_test_power(delta, sd, n, alpha) == scipy_stats_power(delta, sd, n, alpha), (
            delta, sd, n, alpha,
        )  # fmt: skip


def test_no_variation_is_said_not_zero_or_infinite() -> None:
    entry = power_entry(np.zeros(20), 0.05, 0.8, 0.05, 10_000)
    assert (entry["sd"], entry["mde"], entry["n_needed"], entry["note"]) == (
        0.0,
        None,
        None,
        "no variation",
    )


def test_power_uses_the_per_test_alpha_of_the_family() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.uniform(0, 1, 40), rng.uniform(0, 1, 40)
    # Four cells of the same 40 values on other queries each (x: q00.., y: y-q00.., ...): four
    # distinct tests, so alpha / 4 each.
    columns = _values(A=list(a), B=list(b))
    cells = {
        t: {c: {f"{t}-{q}": v for q, v in per.items()} for c, per in columns.items()}
        for t in ("x", "y", "z", "all")
    }
    sig = SignificanceSettings()
    # Family "table": 4 tests, alpha / 4 each.
    out = verdict_cells(cells, sig, family_of=lambda key: None, family_name="table")
    [(other, test)] = out["x"].tests.items()
    power = test["power"]
    d = a - b if other == "B" else b - a
    sd = float(np.std(d, ddof=1))
    assert power["alpha_test"] == 0.05 / 4
    assert power["sd"] == pytest.approx(sd, rel=1e-12)
    assert power["mde"] == minimum_detectable_effect(sd, 40, 0.05 / 4, 0.8, 10_000)
    assert power["n_needed"] == queries_needed(sd, 0.05, 0.05 / 4, 0.8, 10_000)
    assert out["x"].power == {k: power[k] for k in ("mde", "n_needed", "note")}


def test_a_too_few_queries_cell_says_how_many_would_be_enough() -> None:
    cell = verdict_cell(
        _values(A=[0.9, 0.2, 0.8, 0.7], B=[0.1, 0.3, 0.2, 0.5]), SignificanceSettings()
    )
    needed = cell.power["n_needed"]
    assert cell.note == f"too few queries to decide (n=4 < 5); {needed} would detect 0.05"
    assert cell.verdicts == {}


# --- 2. improved / degraded / unchanged --------------------------------------------------


def test_counts_against_the_best_and_the_baseline() -> None:
    values = _values(A=[0.9, 0.5, 0.5, 0.7, 1.0, 0.3], B=[0.1, 0.5, 0.6, 0.2, 1.0, 0.0])
    cell = verdict_cell(values, SignificanceSettings())
    # B relative to the best (A): above on q02, below on q00, q03, q05, equal on q01, q04.
    test = cell.tests["B"]
    assert (test["improved"], test["degraded"], test["unchanged"]) == (1, 3, 2)
    [delta] = delta_cells(values["A"], {"B": values["B"]}, SignificanceSettings())
    assert (delta.improved, delta.degraded, delta.unchanged) == (1, 3, 2)
    assert paired_counts(np.array([1.0, 0.0]), np.array([0.0, 0.0])) == {
        "improved": 1,
        "degraded": 0,
        "unchanged": 1,
    }


# --- 6. Benjamini-Hochberg ---------------------------------------------------------------


def test_bh_equals_scipys_false_discovery_control() -> None:
    p = [0.01, 0.04, 0.03, 0.005, 0.04, 0.2, 0.5, 1.0]
    from scipy import stats  # here, not at collection (see tests/support/references.py)

    assert bh(p) == pytest.approx(stats.false_discovery_control(p, method="bh"), rel=1e-15)
    # By hand: sorted 0.005 0.01 0.03 0.04 0.04 0.2 0.5 1 (m = 8): 8p/rank, running min
    # from the top: 0.04, 0.04, 0.064, 0.064, 0.064, 0.2667, 0.5714, 1.
    assert bh(p) == pytest.approx([0.04, 0.064, 0.064, 0.04, 0.064, 0.8 / 3, 4 / 7, 1.0])


def test_bh_levels_and_intervals_agree_with_bh_verdicts() -> None:
    # Two BH rejections of 4 (0.001 < 0.05/4 x 2 after adjustment, 0.02 x 4/2 = 0.04):
    # every CI at 1 - 2 x 0.05 / 4.
    assert bh_levels([0.001, 0.02, 0.3, 0.6], 0.05, 0.95) == [0.975] * 4
    assert bh_levels([0.3, 0.6], 0.05, 0.95) == [0.975] * 2  # none rejected: R taken as 1
    rng = np.random.default_rng(11)
    base = rng.uniform(0, 1, 25)
    pairs = [(base + shift + rng.normal(0, 0.2, 25), base) for shift in (0.0, 0.05, 0.15, 0.3)]
    sig = SignificanceSettings(correction="bh")
    tests = family_tests(pairs, sig)
    assert [t.p_adjusted for t in tests] == bh([t.result.p_value for t in tests])
    rejected = sum(t.p_adjusted < 0.05 for t in tests)
    assert rejected >= 1
    for t in tests:
        assert t.ci_level == 1 - rejected * (1 - 0.95) / 4 and t.ci_agrees
        assert t.to_json()["p_bh"] == t.p_adjusted and "p_holm" not in t.to_json()
