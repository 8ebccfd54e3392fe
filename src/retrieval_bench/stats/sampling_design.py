"""Poisson sampling designs: which units people label, each with a known inclusion probability.

The design (Poisson sampling; Hajek 1964, Sarndal, Swensson and Wretman 1992, "Model Assisted
Survey Sampling", section 3.5): each unit i of a population of N (a query, with all its pooled
pairs) is sent to people independently of every other unit, with its own inclusion probability
pi_i. The number of units labelled is random, with mean sum(pi) (the budget) and variance
sum(pi (1 - pi)), at most the budget. Independence between units is what keeps the
estimators of `stats.active_ppi` exactly unbiased and gives them a variance estimate that
needs no joint inclusion probabilities; a fixed-size design would need both.

The probabilities (`inclusion_probabilities`) are proportional to a non-negative weight per
unit (the predicted size of the error to be corrected: the variance-optimal rule of Zrnic and
Candes 2024, "Active Statistical Inference", section 3), mixed with uniform by a floor phi:

    w'_i = (1 - phi) * w_i / mean(w) + phi,    pi_i = min(1, c * w'_i),    sum(pi) = budget

with c found by capping at 1 the units that would exceed it and sharing their excess among the
rest (the usual pi-ps construction). Since mean(w') = 1 and capping only raises c, every pi_i
is at least phi * budget / N: phi = 1 is uniform sampling, and with any phi the variance of a
Horvitz-Thompson estimate (a sum of (1 - pi_i)/pi_i e_i^2 terms, `stats.active_ppi`) is at
most (N / (phi budget) - 1) / (N / budget - 1) times what uniform sampling of the same budget
gives (about 1/phi when the budget is a small share of N), whatever the weights: a weight that
carries no signal costs at most that.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def inclusion_probabilities(weights: ArrayLike, budget: float, floor: float) -> np.ndarray:
    """pi_i for each unit (module docstring): proportional to `weights` mixed with uniform by
    `floor`, summing to `budget` (units expected to be labelled), none above 1. Weights all 0
    (nothing to tell units apart) give uniform probabilities. ValueError for a budget outside
    (0, N], a floor outside (0, 1], or a weight that is negative or not finite."""
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 1 or len(w) == 0:
        raise ValueError(f"weights must be a non-empty 1-D array, got shape {w.shape}")
    n = len(w)
    if not 0 < budget <= n:
        raise ValueError(f"the budget must be within (0, {n}] units, got {budget}")
    if not 0 < floor <= 1:
        raise ValueError(f"the floor must be within (0, 1], got {floor}")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError("weights must be finite and non-negative")
    mixed = mixed_weights(w, floor)
    pi = np.zeros(n)
    capped = np.zeros(n, dtype=bool)
    while True:
        free = ~capped
        scale = (budget - capped.sum()) / mixed[free].sum()
        pi[free] = scale * mixed[free]
        over = free & (pi >= 1.0)
        if not over.any():
            break
        capped |= over
        pi[capped] = 1.0
        if capped.all():
            break
    return pi


def mixed_weights(weights: ArrayLike, floor: float) -> np.ndarray:
    """(1 - floor) w / mean(w) + floor (module docstring), the weights' mean 1; all 1 when
    every weight is 0."""
    w = np.asarray(weights, dtype=np.float64)
    mean = w.mean()
    return (1 - floor) * w / mean + floor if mean > 0 else np.ones(len(w))


def poisson_draws(pi: ArrayLike, rng: np.random.Generator, draws: int = 1) -> np.ndarray:
    """`draws` independent Poisson samples: a (draws, N) boolean array, unit i in each with
    probability pi_i, independently of the others."""
    p = np.asarray(pi, dtype=np.float64)
    if np.any((p < 0) | (p > 1)):
        raise ValueError("inclusion probabilities must be within [0, 1]")
    return rng.random((draws, len(p))) < p
