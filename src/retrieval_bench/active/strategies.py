"""The labelling strategies: what each query's inclusion probability is proportional to.

* `uniform`: nothing (every query alike): the baseline.
* `disagreement`: how far the compared systems' rankings differ in the pooled depth, measured
  by the metric: the sum over the query's pooled pairs of |change in the compared difference if
  that pair alone were relevant| (`prediction.disagreement`). Needs no judge: a query both
  systems rank alike cannot move the difference, whatever its labels.
* `uncertainty`: how unsure the calibrated judge is about the query's pooled pairs:
  sqrt(sum_j p_j (1 - p_j)), p_j the calibrated chance that people call pair j relevant
  (`calibration`). Before any calibration exists, uniform.
* `active`: the predicted size of the error the estimate will correct on the query, the
  variance-optimal rule (Zrnic and Candes 2024): E|y - g|, y the compared difference under labels
  drawn from the calibrated judge (`prediction.drawn_values`) and g the predictor the estimate
  will use (lam f + c, fitted on the queries labelled so far; f the judge's expected value).
  Before any calibration exists, `disagreement`.

Each is mixed with uniform by the plan's floor (`stats.sampling_design`), so no query's
probability falls below floor x budget / N.
"""

from __future__ import annotations

import numpy as np

from retrieval_bench.stats.sampling_design import inclusion_probabilities

UNIFORM, DISAGREEMENT, UNCERTAINTY, ACTIVE = "uniform", "disagreement", "uncertainty", "active"
STRATEGIES = (UNIFORM, DISAGREEMENT, UNCERTAINTY, ACTIVE)
# What a strategy falls back to while no calibration exists (a plan's first round).
WITHOUT_CALIBRATION = {
    UNIFORM: UNIFORM,
    DISAGREEMENT: DISAGREEMENT,
    UNCERTAINTY: UNIFORM,
    ACTIVE: DISAGREEMENT,
}


def uncertainty_weights(
    pair_query: np.ndarray, pair_probability: np.ndarray, queries: int
) -> np.ndarray:
    """sqrt(sum_j p_j (1 - p_j)) over each query's pooled pairs (leading axes of the
    probabilities kept)."""
    p = np.asarray(pair_probability, dtype=np.float64)
    spread = p * (1 - p)
    onehot = np.zeros((len(pair_query), queries))
    onehot[np.arange(len(pair_query)), pair_query] = 1.0
    return np.sqrt(spread @ onehot)


def active_weights(
    drawn: np.ndarray, lam: float, intercept: float, prediction: np.ndarray
) -> np.ndarray:
    """E|y - (lam f + c)| per query, over the drawn values `drawn` (draws, N) of y."""
    return np.abs(drawn - (lam * prediction + intercept)).mean(axis=0)


def round_design(
    weights: np.ndarray | None, rest: np.ndarray, budget: float, floor: float
) -> tuple[np.ndarray, np.ndarray]:
    """(a round's inclusion probabilities: 1 where an earlier round labelled, the strategy's
    `weights` (None: uniform) mixed with uniform by `floor` among the `rest`, summing to
    `budget`; the probabilities every query would have were it a candidate, at the same scale:
    what the round's coefficients are fitted with)."""
    n = len(rest)
    pi = np.ones(n)
    if weights is None:
        weights, floor = np.ones(n), 1.0
    candidates = int(rest.sum())
    if candidates == 0:
        return pi, pi
    budget = min(budget, float(candidates))
    pi[rest] = inclusion_probabilities(weights[rest], budget, floor)
    return pi, inclusion_probabilities(weights, min(float(n), budget * n / candidates), floor)
