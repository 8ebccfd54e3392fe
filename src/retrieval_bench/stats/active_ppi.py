"""Means estimated from units people labelled under a Poisson design (`stats.sampling_design`),
with a model's prediction for every unit: inverse-probability-weighted prediction-powered
inference (active statistical inference; Zrnic and Candes 2024), and the same estimate without
the prediction (people only).

Population: N units (queries), each with a value y_i under people's labels (known only where
people labelled it) and a prediction f_i under the model judge's (known for every unit). The
target is the population mean theta = (1/N) sum y_i (the metric of the whole evaluation set
under people's labels). Unit i is labelled (xi_i = 1) with probability pi_i, independently.

The estimate (the difference estimator of survey sampling, Sarndal, Swensson and Wretman 1992,
section 6.3, with g_i = lam f_i + c as the known auxiliary):

    theta_hat = (1/N) sum_i [ g_i + xi_i (y_i - g_i) / pi_i ]
    V_hat     = (1/N^2) sum_i xi_i (1 - pi_i) / pi_i^2 (y_i - g_i)^2

For (lam, c) fixed before the labels come back, E[xi_i / pi_i] = 1 makes theta_hat exactly
unbiased whatever the judge's quality, its variance is (1/N^2) sum_i (1 - pi_i)/pi_i
(y_i - g_i)^2, and V_hat is an exactly unbiased estimate of it (`difference_estimate`). A unit
with pi_i = 1 (labelled with certainty, e.g. in an earlier round) counts its own value and adds
no variance. The interval is theta_hat +/- z(1 - alpha/2) sqrt(V_hat): normal, as
`stats.ppi`'s, its coverage resting on the central limit theorem over the labelled units.

`tuned_estimate` chooses (lam, c) from the labels themselves, as PPI++'s power tuning does
(Angelopoulos, Duchi and Zrnic 2023): the weighted least-squares fit of y on (f, 1) over the
labelled units with weights (1 - pi)/pi^2, which minimises V_hat, lam clipped to [0, 1] (a
judge without signal is weighed down towards 0) and c refitted given lam; people only: lam = 0,
c tuned. V_hat is then scaled by n/(n - q) (n labelled units with pi < 1, q the coefficients
fitted), the usual degrees-of-freedom correction. The estimate is unbiased to O(1/n) rather
than exactly; the simulation (`active.simulate`) measures the coverage that results. What the
tuning does: under uniform pi the fit is ordinary least squares and theta_hat is the classical
regression (PPI++) estimate, lam mean_N(f) + mean_n(y - lam f) (with lam = 0: the mean of the
labelled units, with the finite-population correction); under an active design the weights
favour the units labelled with small pi, where the judge's error was predicted small, so c
follows them (for a paired difference, mostly queries whose rankings agree, with y = 0).

Rounds (`combine_rounds`): round t draws its units with probabilities chosen after rounds
1..t-1 came back (units labelled before count as pi = 1), and its coefficients are fitted on
those earlier labels (`fitted_coefficients`), so they too are fixed before its own labels come
back: each round after the first is exactly unbiased given the earlier ones, the first (a
uniform pilot, tuned on its own labels) to O(1/n). Their sum with weights fixed in advance
(each round's share of the planned budget) is unbiased to the same order, and since the rounds'
errors are martingale differences (each has mean 0 given what came before) they are
uncorrelated: V = sum w_t^2 V_t.

The weights (`planned_weights`): a round drawn where the judge's error is predicted large
(`active`) can be far more precise than the uniform pilot, and the budget shares would then
waste it. So when a later round is drawn, the weights are set to the inverse of each round's
variance as the calibrated judge predicts it, sum_i (1 - pi_t,i)/pi_t,i E[(y_i - g_i)^2] over the
round's candidates (E over labels drawn from the calibration), before that round's labels come
back: the last round's estimate keeps its exact unbiasedness given the earlier ones, and since
the weights depend on earlier rounds only through the judge's calibration, the combination is
unbiased to the same order as the pilot (the simulation measures the coverage). A judge whose
predictions are wrong makes the weights less efficient, never the estimate invalid.

Every function takes `sampled` with leading axes (draws of a simulation) before the unit axis,
so one call evaluates a thousand draws; `pi` is per unit, or per draw and unit.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from retrieval_bench.stats.ppi import Estimate


def _arrays(
    outcome: ArrayLike, sampled: ArrayLike, pi: ArrayLike
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(y with unlabelled units zeroed, sampled as bool, pi with 1 on unlabelled units),
    checked: every labelled unit has a finite value and a probability in (0, 1]."""
    s = np.asarray(sampled, dtype=bool)
    y = np.asarray(outcome, dtype=np.float64)
    p = np.broadcast_to(np.asarray(pi, dtype=np.float64), s.shape)
    if y.shape[-1] != s.shape[-1]:
        raise ValueError(f"{y.shape[-1]} values for {s.shape[-1]} units")
    y = np.broadcast_to(y, s.shape)
    if not np.all(np.isfinite(y[s])):
        raise ValueError("a labelled unit has no value")
    if np.any(p[s] <= 0) or np.any(p > 1):
        raise ValueError("a labelled unit's inclusion probability must be within (0, 1]")
    return np.where(s, y, 0.0), s, np.where(s, p, 1.0)


def _prediction(prediction: ArrayLike, units: int) -> np.ndarray:
    f = np.asarray(prediction, dtype=np.float64)
    if f.shape != (units,):
        raise ValueError(f"{f.shape} predictions for {units} units")
    if not np.all(np.isfinite(f)):
        raise ValueError("every unit needs a finite prediction")
    return f


def difference_estimate(
    prediction: ArrayLike,
    outcome: ArrayLike,
    sampled: ArrayLike,
    pi: ArrayLike,
    lam: ArrayLike = 1.0,
    intercept: ArrayLike = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """(theta_hat, V_hat) for g = lam f + intercept (module docstring), one per draw: exactly
    unbiased, both, when `lam` and `intercept` do not depend on these labels. `outcome` is read
    on the sampled units only (NaN elsewhere is fine); `lam`, `intercept` one value or one per
    draw."""
    y, s, p = _arrays(outcome, sampled, pi)
    n = s.shape[-1]
    f = _prediction(prediction, n)
    lam_ = np.asarray(lam, dtype=np.float64)[..., None]
    c_ = np.asarray(intercept, dtype=np.float64)[..., None]
    residual = np.where(s, y - lam_ * f - c_, 0.0)
    mean = lam_[..., 0] * f.mean() + c_[..., 0] + (residual / p).sum(axis=-1) / n
    var = ((1 - p) / p**2 * residual**2).sum(axis=-1) / n**2
    return mean, var


def _least_squares(
    prediction: np.ndarray,
    outcome: np.ndarray,
    weights: np.ndarray,
    use_prediction: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Weighted least squares of y on (f, 1) (`weights` zero off the sample), lam clipped to
    [0, 1] and c refitted given it; lam = 0 without the prediction; where the weights are all
    zero, lam = 1 (or 0) and c = 0."""
    total = weights.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        y_bar = np.where(total > 0, (weights * outcome).sum(axis=-1) / total, 0.0)
        f_bar = np.where(total > 0, (weights * prediction).sum(axis=-1) / total, 0.0)
        if use_prediction:
            dev_f = np.where(weights > 0, prediction - f_bar[..., None], 0.0)
            num = (weights * dev_f * (outcome - y_bar[..., None])).sum(axis=-1)
            den = (weights * dev_f**2).sum(axis=-1)
            lam = np.clip(np.where(den > 0, num / np.where(den > 0, den, 1.0), 1.0), 0.0, 1.0)
        else:
            lam = np.zeros_like(total)
    return lam, np.where(total > 0, y_bar - lam * f_bar, 0.0)


def tuned_coefficients(
    prediction: ArrayLike,
    outcome: ArrayLike,
    sampled: ArrayLike,
    pi: ArrayLike,
    use_prediction: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """(lam, c) per draw minimising V_hat (module docstring): weighted least squares of y on
    (f, 1) with weights (1 - pi)/pi^2 over the labelled units, lam clipped to [0, 1]; lam = 0
    without the prediction. Where no labelled unit has pi < 1, lam = 1 (or 0) and c = 0."""
    y, s, p = _arrays(outcome, sampled, pi)
    weights = np.where(s, (1 - p) / p**2, 0.0)
    return _least_squares(_prediction(prediction, s.shape[-1]), y, weights, use_prediction)


def fitted_coefficients(
    prediction: ArrayLike,
    outcome: ArrayLike,
    known: ArrayLike,
    use_prediction: bool = True,
    design_pi: ArrayLike | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(lam, c) fitted on the `known` units (labelled by earlier rounds), lam clipped to
    [0, 1]: a later round's predictor, fixed before that round's labels come back (module
    docstring). Least squares of y on (f, 1), weighted by (1 - pi)/pi with `design_pi` the
    probabilities the round's design gives each unit (were it a candidate), so the fit
    minimises the round's variance, sum (1 - pi)/pi (y - lam f - c)^2, as the known units
    estimate it; unweighted (ordinary least squares) without `design_pi`."""
    y, s, _ = _arrays(outcome, known, 1.0)
    if design_pi is None:
        weights = 1.0 * s
    else:
        p = np.broadcast_to(np.asarray(design_pi, dtype=np.float64), s.shape)
        if np.any((p <= 0) | (p > 1)):
            raise ValueError("design probabilities must be within (0, 1]")
        weights = np.where(s, (1 - p) / p, 0.0)
    return _least_squares(_prediction(prediction, s.shape[-1]), y, weights, use_prediction)


def tuned_estimate(
    prediction: ArrayLike,
    outcome: ArrayLike,
    sampled: ArrayLike,
    pi: ArrayLike,
    use_prediction: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """(theta_hat, V_hat) with (lam, c) tuned on these labels, V_hat with the degrees-of-freedom
    correction (module docstring); V_hat is NaN where too few units were labelled to fit."""
    lam, intercept = tuned_coefficients(prediction, outcome, sampled, pi, use_prediction)
    mean, var = difference_estimate(prediction, outcome, sampled, pi, lam, intercept)
    s = np.asarray(sampled, dtype=bool)
    p = np.broadcast_to(np.asarray(pi, dtype=np.float64), s.shape)
    n = (s & (p < 1)).sum(axis=-1)
    fitted = 2 if use_prediction else 1
    with np.errstate(invalid="ignore", divide="ignore"):
        scale = np.where(n > fitted, n / np.maximum(n - fitted, 1), np.where(n == 0, 1.0, np.nan))
    return mean, var * scale


def combine_rounds(
    means: Sequence[ArrayLike], variances: Sequence[ArrayLike], weights: Sequence[float]
) -> tuple[np.ndarray, np.ndarray]:
    """sum w_t theta_t and sum w_t^2 V_t over rounds (module docstring); the weights, fixed
    before the first round, must be positive and sum to 1."""
    w = np.asarray(weights, dtype=np.float64)
    if len(w) != len(means) or len(w) != len(variances) or len(w) == 0:
        raise ValueError(f"{len(w)} weights for {len(means)} rounds")
    if np.any(w <= 0) or not np.isclose(w.sum(), 1.0):
        raise ValueError(f"round weights must be positive and sum to 1, got {w.tolist()}")
    mean = sum(wt * np.asarray(m, dtype=np.float64) for wt, m in zip(w, means, strict=True))
    var = sum(wt**2 * np.asarray(v, dtype=np.float64) for wt, v in zip(w, variances, strict=True))
    return np.asarray(mean), np.asarray(var)


def planned_weights(
    squared_error: ArrayLike, designs: Sequence[ArrayLike], fallback: Sequence[float]
) -> list[float]:
    """Each round's weight, proportional to the inverse of its predicted variance
    sum_i (1 - pi_t,i)/pi_t,i e_i (module docstring): `squared_error` (N,) the predicted
    E[(y_i - g_i)^2], `designs` each round's probabilities (N,), 1 where the unit was not its
    candidate. `fallback` (the budget shares, renormalised) where a round's predicted variance
    is not positive and finite (nothing predicted to vary)."""
    e = np.asarray(squared_error, dtype=np.float64)
    predicted = []
    for pi in designs:
        p = np.asarray(pi, dtype=np.float64)
        if p.shape != e.shape or np.any((p <= 0) | (p > 1)):
            raise ValueError("each round's probabilities: one per unit, within (0, 1]")
        predicted.append(float(((1 - p) / p * e).sum()))
    v = np.array(predicted)
    if len(v) != len(fallback) or len(v) == 0:
        raise ValueError(f"{len(fallback)} fallback weights for {len(v)} rounds")
    if not np.all(np.isfinite(v) & (v > 0)):
        total = float(sum(fallback))
        return [float(w) / total for w in fallback]
    inverse = 1 / v
    return (inverse / inverse.sum()).tolist()


def as_estimate(mean: float, var: float, confidence: float, labelled: int, units: int) -> Estimate:
    """One draw's (theta_hat, V_hat) as an `Estimate` with its normal interval."""
    se = float(np.sqrt(max(var, 0.0)))
    estimate = Estimate(float(mean), se, 0.0, 0.0, confidence, labelled, units - labelled)
    return estimate.at(confidence)
