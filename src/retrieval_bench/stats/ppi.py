"""Means with normal-theory intervals: the classical one, and prediction-powered inference.

Prediction-powered inference (PPI; Angelopoulos, Bates, Fannjiang, Jordan and Zrnic, Science
382, 2023, "Prediction-powered inference", mean estimation) estimates the mean of Y when only
n units carry Y and a model's prediction f is available for N more: the prediction's mean over
the N, corrected by the prediction's error measured on the n (the "rectifier"),

    theta_PP = mean_N(f) - mean_n(f - Y)
    CI = theta_PP +/- z(1 - alpha/2) * sqrt(sigma2_f / N + sigma2_{f-Y} / n)

with sigma2 the sample variances over the N and the n, ddof 1 (1/(N - 1) and 1/(n - 1)), the
convention of the classical interval beside it (the paper's `ppi_py` divides by N and n; the
two differ by a factor N/(N - 1) and n/(n - 1) in each term, so PPI needs n, N >= 2). The
interval is valid whatever the model's quality (a bad model only widens it), provided the n
labelled units are a random sample of the same population as the N. Here a unit is a query, Y
a metric under people's labels and f the same metric under the model judge's
(`judge.estimates`).

`classical_mean` is the interval without a model: mean +/- z sd / sqrt(n) (sd with ddof 1). So
a PPI estimate whose rectifier is 0 on every labelled unit has the classical interval of f over
the N.
Both give a two-sided normal p-value for "the mean is 0", so the three estimates of a paired
difference are tested the same way.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Estimate:
    """A mean, its standard error and its interval at `confidence`; `n` the units with the
    quantity itself (people's labels), `n_predicted` those with the prediction only (0 for a
    classical estimate)."""

    mean: float
    se: float
    low: float
    high: float
    confidence: float
    n: int
    n_predicted: int = 0

    @property
    def p_value(self) -> float:
        """Two-sided normal p-value of "the true mean is 0"."""
        if self.se == 0:
            return 1.0 if self.mean == 0 else 0.0
        from scipy.stats import norm  # imported here: scipy.stats costs most of an app's start

        return float(2 * norm.sf(abs(self.mean) / self.se))

    def at(self, confidence: float) -> Estimate:
        """The same estimate with its interval drawn at another level (a Holm step's)."""
        half = _z(confidence) * self.se
        return Estimate(
            self.mean,
            self.se,
            self.mean - half,
            self.mean + half,
            confidence,
            self.n,
            self.n_predicted,
        )

    def to_json(self) -> dict[str, float | int]:
        return {
            "mean": self.mean,
            "se": self.se,
            "ci_low": self.low,
            "ci_high": self.high,
            "confidence": self.confidence,
            "n": self.n,
            "n_predicted": self.n_predicted,
            "p": self.p_value,
        }


def _z(confidence: float) -> float:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    from scipy.stats import norm  # as in Estimate.p_value

    return float(norm.ppf(1 - (1 - confidence) / 2))


def classical_mean(values: Sequence[float], confidence: float = 0.95) -> Estimate:
    """mean +/- z(1 - alpha/2) sd / sqrt(n), sd with ddof 1 (0 for a single value)."""
    y = np.asarray(values, dtype=np.float64)
    if len(y) == 0:
        raise ValueError("a mean of no value")
    se = float(y.std(ddof=1) / math.sqrt(len(y))) if len(y) > 1 else 0.0
    return Estimate(float(y.mean()), se, 0.0, 0.0, confidence, len(y)).at(confidence)


def ppi_mean(
    predicted: Sequence[float],
    labelled_predicted: Sequence[float],
    labelled: Sequence[float],
    confidence: float = 0.95,
) -> Estimate:
    """The prediction-powered mean (module docstring): `predicted` is f on the N units
    without Y; `labelled_predicted` and `labelled` are f and Y on the n units with Y."""
    f_unlabelled = np.asarray(predicted, dtype=np.float64)
    f_labelled = np.asarray(labelled_predicted, dtype=np.float64)
    y = np.asarray(labelled, dtype=np.float64)
    if len(f_labelled) != len(y):
        raise ValueError(f"{len(f_labelled)} predictions for {len(y)} labelled units")
    if len(y) < 2 or len(f_unlabelled) < 2:
        raise ValueError("PPI needs 2 labelled units and 2 with the prediction only (ddof 1)")
    rectifier = f_labelled - y
    mean = float(f_unlabelled.mean() - rectifier.mean())
    se = math.sqrt(
        f_unlabelled.var(ddof=1) / len(f_unlabelled) + rectifier.var(ddof=1) / len(y)
    )
    estimate = Estimate(mean, se, 0.0, 0.0, confidence, len(y), len(f_unlabelled))
    return estimate.at(confidence)
