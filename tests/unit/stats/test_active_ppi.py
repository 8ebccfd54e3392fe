"""The Poisson design and the estimators under it (`stats.sampling_design`,
`stats.active_ppi`): exact unbiasedness by enumerating every sample of a small population
against a hand computation, and coverage by simulation on a synthetic one."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from retrieval_bench.stats.active_ppi import (
    as_estimate,
    combine_rounds,
    difference_estimate,
    fitted_coefficients,
    planned_weights,
    tuned_coefficients,
    tuned_estimate,
)
from retrieval_bench.stats.sampling_design import inclusion_probabilities, poisson_draws

# Four units: y under people's labels, f the judge's prediction, pi the design.
Y = np.array([1.0, 0.0, 1.0, 0.5])
F = np.array([0.8, 0.2, 0.6, 0.5])
PI = np.array([0.5, 0.25, 1.0, 0.8])


def _every_sample(pi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every subset of the units as a (2^N, N) mask, and its probability under Poisson
    sampling."""
    masks = np.array(list(itertools.product([False, True], repeat=len(pi))))
    prob = np.prod(np.where(masks, pi, 1 - pi), axis=1)
    return masks, prob


def test_the_estimate_is_exactly_unbiased_with_the_variance_computed_by_hand() -> None:
    masks, prob = _every_sample(PI)
    assert prob.sum() == pytest.approx(1.0)
    mean, var = difference_estimate(F, Y, masks, PI, lam=1.0)
    # theta = (1 + 0 + 1 + 0.5) / 4 = 0.625.
    assert float(prob @ mean) == pytest.approx(0.625, abs=1e-12)
    # Var = (1/N^2) sum (1 - pi)/pi (y - f)^2 = (1/16) (1 * 0.04 + 3 * 0.04 + 0 + 0.25 * 0) = 0.01
    spread = float(prob @ (mean - 0.625) ** 2)
    assert spread == pytest.approx(0.01, abs=1e-12)
    # ... and V_hat is unbiased for it.
    assert float(prob @ var) == pytest.approx(0.01, abs=1e-12)


def test_any_fixed_coefficients_stay_unbiased() -> None:
    masks, prob = _every_sample(PI)
    mean, var = difference_estimate(F, Y, masks, PI, lam=0.5, intercept=0.2)
    assert float(prob @ mean) == pytest.approx(0.625, abs=1e-12)
    residual = Y - 0.5 * F - 0.2
    by_hand = float(((1 - PI) / PI * residual**2).sum() / 16)
    assert float(prob @ (mean - 0.625) ** 2) == pytest.approx(by_hand, abs=1e-12)
    assert float(prob @ var) == pytest.approx(by_hand, abs=1e-12)


def test_one_sample_by_hand() -> None:
    # Units 0 and 2 labelled: theta_hat = mean(f) + ((1 - 0.8) / 0.5 + (1 - 0.6) / 1) / 4
    mean, var = difference_estimate(F, [1.0, np.nan, 1.0, np.nan], [True, False, True, False], PI)
    assert float(mean) == pytest.approx(0.525 + (0.4 + 0.4) / 4)
    # Only unit 0 adds variance (unit 2 has pi = 1): (1 - 0.5) / 0.25 * 0.04 / 16
    assert float(var) == pytest.approx(0.5 / 0.25 * 0.04 / 16)
    estimate = as_estimate(float(mean), float(var), 0.95, labelled=2, units=4)
    assert estimate.n == 2 and estimate.n_predicted == 2
    assert estimate.high - estimate.low == pytest.approx(2 * 1.959964 * np.sqrt(0.005), rel=1e-6)


def test_people_only_under_uniform_sampling_is_the_sample_mean() -> None:
    y = np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0])
    sampled = np.array([True, False, True, False, True, True, False, False])
    mean, var = tuned_estimate(np.zeros(8), y, sampled, np.full(8, 0.5), use_prediction=False)
    labelled = y[sampled]
    assert float(mean) == pytest.approx(labelled.mean())
    # (1/N^2) sum (1 - pi)/pi^2 (y - ybar)^2, times n/(n - 1): with N pi = n, the classical
    # (1 - n/N) s^2 / n.
    s2 = labelled.var(ddof=1)
    assert float(var) == pytest.approx((1 - 0.5) * s2 / 4)


def test_tuning_under_uniform_sampling_is_the_regression_estimate() -> None:
    rng = np.random.default_rng(5)
    f = rng.random(40)
    y = np.clip(0.6 * f + 0.1 + rng.normal(0, 0.05, 40), 0, 1)
    sampled = rng.random(40) < 0.5
    lam, c = tuned_coefficients(f, y, sampled, np.full(40, 0.5))
    slope, icpt = np.polyfit(f[sampled], y[sampled], 1)
    assert float(lam) == pytest.approx(slope) and float(c) == pytest.approx(icpt)
    mean, _ = tuned_estimate(f, y, sampled, np.full(40, 0.5))
    by_hand = slope * f.mean() + (y[sampled] - slope * f[sampled]).mean()
    assert float(mean) == pytest.approx(by_hand)


def test_too_few_labelled_units_leave_the_variance_undefined() -> None:
    _, var = tuned_estimate([0.1, 0.2, 0.3], [1.0, np.nan, np.nan], [True, False, False], 0.5)
    assert np.isnan(var)


def test_inclusion_probabilities_sum_to_the_budget_and_respect_the_floor() -> None:
    weights = np.array([0.0, 0.0, 1.0, 2.0, 50.0, 0.5, 0.0, 3.0, 0.0, 1.0])
    pi = inclusion_probabilities(weights, budget=4, floor=0.2)
    assert pi.sum() == pytest.approx(4.0)
    assert pi.max() == 1.0  # the heavy unit is capped, its excess shared among the rest
    assert pi.min() >= 0.2 * 4 / 10 - 1e-12
    assert np.all(np.diff(pi[[0, 5, 2, 3, 7, 4]]) >= 0)  # monotone in the weight
    assert np.allclose(inclusion_probabilities(np.zeros(5), 2, 0.3), 0.4)
    assert np.allclose(inclusion_probabilities(weights, 4, 1.0), 0.4)  # floor 1: uniform
    assert np.allclose(inclusion_probabilities(weights, 10, 0.2), 1.0)  # budget N: everyone


@pytest.mark.parametrize(
    ("weights", "budget", "floor", "message"),
    [
        ([1.0, 2.0], 3, 0.2, "budget"),
        ([1.0, 2.0], 0, 0.2, "budget"),
        ([1.0, 2.0], 1, 0.0, "floor"),
        ([1.0, -2.0], 1, 0.2, "non-negative"),
        ([1.0, np.nan], 1, 0.2, "finite"),
    ],
)
def test_inclusion_probabilities_refuse_bad_input(
    weights: list[float], budget: float, floor: float, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        inclusion_probabilities(weights, budget, floor)


def _population(rng: np.random.Generator, n: int = 400) -> tuple[np.ndarray, np.ndarray]:
    """Per-query metric values in [0, 1] under people (y) and a judge (f) that is right on
    most queries and off by a lot on a few."""
    y = rng.beta(0.6, 0.6, n)
    off = rng.random(n) < 0.25
    f = np.clip(np.where(off, y + rng.normal(0, 0.4, n), y + rng.normal(0, 0.03, n)), 0, 1)
    return y, f


def test_the_interval_covers_at_its_level_under_an_active_design() -> None:
    rng = np.random.default_rng(7)
    y, f = _population(rng)
    theta = y.mean()
    # The plan's predicted error: the true one, blurred.
    pi = inclusion_probabilities(np.abs(y - f) + rng.random(len(y)) * 0.05, 60, floor=0.2)
    sampled = poisson_draws(pi, rng, draws=4000)
    mean, var = difference_estimate(f, y, sampled, pi, lam=1.0)
    half = 1.959964 * np.sqrt(var)
    coverage = float(np.mean(np.abs(mean - theta) <= half))
    assert 0.93 <= coverage <= 0.97
    # Unbiased: the mean over draws within 4 standard errors of the simulation.
    assert abs(mean.mean() - theta) < 4 * mean.std() / np.sqrt(len(mean))
    # ... and narrower than the same budget spent uniformly.
    uniform = np.full(len(y), 60 / len(y))
    _, var_u = difference_estimate(f, y, poisson_draws(uniform, rng, draws=4000), uniform)
    assert np.sqrt(var).mean() < 0.8 * np.sqrt(var_u).mean()
    # Tuned on the labels themselves: unbiased to O(1/n), still covering.
    mean_t, var_t = tuned_estimate(f, y, sampled, pi)
    assert 0.93 <= float(np.mean(np.abs(mean_t - theta) <= 1.959964 * np.sqrt(var_t))) <= 0.97
    assert abs(mean_t.mean() - theta) < 4 * mean_t.std() / np.sqrt(len(mean_t))


def test_tuning_weighs_a_judge_without_signal_down() -> None:
    rng = np.random.default_rng(3)
    y = rng.random(300)
    pi = np.full(300, 0.3)
    sampled = poisson_draws(pi, rng, draws=200)
    noise = rng.random(300)
    lam, _ = tuned_coefficients(noise, y, sampled, pi)
    assert np.median(lam) < 0.2
    lam, c = tuned_coefficients(y, y, sampled, pi)
    assert lam == pytest.approx(1.0) and c == pytest.approx(0.0, abs=1e-12)
    mean, var = tuned_estimate(noise, y, sampled, pi)
    assert np.mean(np.abs(mean - y.mean()) <= 1.959964 * np.sqrt(var)) >= 0.9


def test_rounds_chosen_from_earlier_labels_combine_unbiasedly() -> None:
    rng = np.random.default_rng(11)
    y, f = _population(rng, 200)
    draws = 4000
    first = np.full(200, 20 / 200)
    s1 = poisson_draws(first, rng, draws)
    m1, v1 = difference_estimate(f, y, s1, first)
    # Round 2, drawn after round 1 came back: its units are known (pi = 1); the others are
    # weighted by a rule that depends on what round 1 saw (its largest error's size).
    second = np.ones((draws, 200))
    for d in range(draws):
        seen = np.abs(y - f)[s1[d]].max(initial=0.0)
        rest = ~s1[d]
        second[d, rest] = inclusion_probabilities(np.abs(f[rest] - 0.5) + seen, 30, 0.2)
    s2 = s1 | (rng.random((draws, 200)) < second)
    m2, v2 = difference_estimate(f, y, s2, second)
    mean, var = combine_rounds([m1, m2], [v1, v2], [0.4, 0.6])
    assert abs(mean.mean() - y.mean()) < 4 * mean.std() / np.sqrt(draws)
    coverage = np.mean(np.abs(mean - y.mean()) <= 1.959964 * np.sqrt(var))
    assert 0.93 <= coverage <= 0.97
    with pytest.raises(ValueError, match="sum to 1"):
        combine_rounds([m1, m2], [v1, v2], [0.5, 0.6])


def test_planned_weights_invert_each_round_s_predicted_variance_by_hand() -> None:
    e = np.array([0.04, 0.01, 0.0, 0.09])
    # Round 1: (1 - 0.5)/0.5 = 1 per unit: 0.14. Round 2 (PI): 1 * 0.04 + 3 * 0.01 + 0 +
    # 0.25 * 0.09 = 0.0925. Weights 1/V normalised: (0.0925, 0.14) / 0.2325.
    weights = planned_weights(e, [np.full(4, 0.5), PI], [0.3, 0.7])
    assert weights == pytest.approx([0.0925 / 0.2325, 0.14 / 0.2325])
    # Nothing predicted to vary in a round: the budget shares, renormalised.
    assert planned_weights(np.zeros(4), [np.full(4, 0.5), PI], [0.3, 0.3]) == [0.5, 0.5]
    with pytest.raises(ValueError, match="within"):
        planned_weights(e, [np.zeros(4)], [1.0])


def test_rounds_weighted_by_their_predicted_variance_stay_unbiased_and_cover() -> None:
    """Round 2 drawn where round 1 predicts the error large; the weights set from a blurred
    prediction of the error after round 1, before round 2's labels: the combination stays
    unbiased within the simulation's error, covers at its level, and is narrower than the
    budget shares' combination."""
    rng = np.random.default_rng(5)
    y, f = _population(rng, 200)
    draws = 3000
    first = np.full(200, 20 / 200)
    s1 = poisson_draws(first, rng, draws)
    m1, v1 = difference_estimate(f, y, s1, first)
    means, variances, by_shares = [], [], []
    for d in range(draws):
        seen = np.abs(y - f)[s1[d]].mean() if s1[d].any() else 0.1
        predicted = (np.abs(y - f) + seen * rng.random(200)) ** 2
        rest = ~s1[d]
        second = np.ones(200)
        second[rest] = inclusion_probabilities(np.sqrt(predicted[rest]), 30, 0.2)
        s2 = s1[d] | (rng.random(200) < second)
        m2, v2 = difference_estimate(f, y, s2, second)
        weights = planned_weights(predicted, [first, second], [0.4, 0.6])
        mean, var = combine_rounds([m1[d], m2], [v1[d], v2], weights)
        means.append(float(mean))
        variances.append(float(var))
        by_shares.append(float(combine_rounds([m1[d], m2], [v1[d], v2], [0.4, 0.6])[1]))
    mean_, var_ = np.array(means), np.array(variances)
    assert abs(mean_.mean() - y.mean()) < 4 * mean_.std() / np.sqrt(draws)
    coverage = np.mean(np.abs(mean_ - y.mean()) <= 1.959964 * np.sqrt(var_))
    assert 0.93 <= coverage <= 0.97
    assert np.sqrt(var_).mean() < 0.9 * np.sqrt(np.array(by_shares)).mean()


def test_fitted_coefficients_weigh_the_known_units_by_the_round_s_design() -> None:
    f = np.array([0.0, 1.0, 2.0, 3.0, 9.0])
    y = np.array([0.0, 1.0, 2.5, 3.0, np.nan])
    known = np.array([True, True, True, True, False])
    lam, c = fitted_coefficients(f, y, known)  # ordinary least squares over the known
    slope = np.polyfit(f[:4], y[:4], 1)[0]
    assert float(lam) == pytest.approx(min(slope, 1.0)) and float(c) == pytest.approx(
        y[:4].mean() - min(slope, 1.0) * f[:4].mean()
    )
    design = np.array([0.5, 0.1, 0.5, 0.5, 0.2])  # unit 1 would be rare: weight (1-pi)/pi = 9
    _, c_people = fitted_coefficients(np.zeros(5), y, known, use_prediction=False, design_pi=design)
    w = (1 - design[:4]) / design[:4]
    assert float(c_people) == pytest.approx((w * y[:4]).sum() / w.sum())
    with pytest.raises(ValueError, match="design probabilities"):
        fitted_coefficients(f, y, known, design_pi=np.zeros(5))
