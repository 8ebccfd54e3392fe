"""The simulation that measures the strategies on a comparison whose labels are all known.

People's labels (the evaluation set's) are the truth; the strategies never see them except
where a plan asks. Each draw runs a whole plan of two rounds, as `active.plan` draws one:

1. Round 1 (`first_share` of the budget): a uniform pilot, Poisson-sampled; the chosen
   queries' labels are revealed (every pooled pair of each, and their metric under people's
   labels). Its estimate tunes its coefficients on its own labels (`tuned_estimate`: under
   uniform sampling the classical regression estimate, and the sample mean without the judge).
2. The judge is calibrated on the pairs round 1 revealed (`calibration`), its expected metric
   per query computed by Monte Carlo over label draws (`prediction.drawn_values`), and the
   predictor's coefficients fitted on round 1's queries (`fitted_coefficients`).
3. Round 2 (the rest of the budget) over the queries not labelled yet, with the strategy's
   weights under that calibration; round 1's queries count as labelled with certainty. Its
   estimate uses the coefficients fitted in step 2, fixed before its labels come back, so it is
   exactly unbiased given round 1 (`difference_estimate`).
4. The rounds' estimates combined (`combine_rounds`) with weights set when round 2 is drawn,
   before its labels: the inverse of each round's variance as the calibration of step 2
   predicts it for the paired difference (`stats.active_ppi.planned_weights`), as `run.label
   next` records them.

The prediction of round 1 is the metric under the judge's own grades where it has any (none
otherwise: its "with the judge" estimate is then the people-only one).

Round 1 depends on the draw, so step 2 is done per first round: `first_rounds` of them, each
followed by `second_draws` second rounds (`first_rounds x second_draws` draws in all, 100 x 10 =
1,000 by default); every estimate is vectorised over the second rounds. Every strategy shares the
same first rounds (common random numbers), so their differences are not the noise of different
draws.

Measured per strategy, estimator and budget, for the paired difference and each system's mean:
the interval's mean width, its coverage of the true value (the metric under every label), the
mean bias, the queries labelled, and (the difference) how often its verdict, the interval
excluding 0 for one system or "tie", agrees with the full-label verdict (the same normal
interval over every query). `labels_needed` interpolates each curve of width against queries
labelled (log-log) to the number of queries that reaches the width uniform sampling without the
judge reaches at a budget: the reference, `ONE_ROUND`, is one round of uniform sampling
estimated by people's labels alone (the sample mean), simulated beside the plans at each budget.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from retrieval_bench.active.calibration import N_CELLS, cell_counts, probabilities
from retrieval_bench.active.compared import Compared
from retrieval_bench.active.prediction import disagreement, drawn_values, judged_values
from retrieval_bench.active.strategies import (
    ACTIVE,
    DISAGREEMENT,
    STRATEGIES,
    UNCERTAINTY,
    UNIFORM,
    active_weights,
    round_design,
    uncertainty_weights,
)
from retrieval_bench.progress import progress
from retrieval_bench.stats.active_ppi import (
    combine_rounds,
    difference_estimate,
    fitted_coefficients,
    planned_weights,
    tuned_estimate,
)
from retrieval_bench.stats.ppi import classical_mean
from retrieval_bench.stats.sampling_design import poisson_draws

PEOPLE, PPI = "people", "ppi"
ESTIMATORS = (PEOPLE, PPI)
DIFFERENCE = "difference"
TIE = "tie"
# The reference: one round of uniform Poisson sampling, people's labels only (the plain random
# sample's mean), what labelling without a judge or a plan does.
ONE_ROUND = "uniform-one-round"


@dataclass(frozen=True)
class Case:
    """A comparison of two systems whose labels are known. `truth` (S, N): each system's
    metric per query under people's labels; `pair_relevant` (P,): people's label of each pooled
    pair (1 relevant); `pair_judged` (P,): the judge's grade as relevant (1) or not, None for a
    judge without thresholds (a bare score); `pair_cell` (P,): its calibration cell."""

    name: str
    compared: Compared
    metric: str
    k: int
    truth: np.ndarray
    pair_relevant: np.ndarray
    pair_judged: np.ndarray | None
    pair_cell: np.ndarray

    @property
    def contrast(self) -> np.ndarray:
        return np.array([1.0, -1.0])

    def quantities(self) -> dict[str, np.ndarray]:
        """What is estimated: the paired difference (first minus second) and each mean."""
        out = {DIFFERENCE: self.contrast @ self.truth}
        out.update({system: self.truth[s] for s, system in enumerate(self.compared.systems)})
        return out


@dataclass(frozen=True)
class Settings:
    budgets: Sequence[int]
    strategies: Sequence[str] = STRATEGIES
    first_share: float = 0.3
    floor: float = 0.2
    first_rounds: int = 100
    second_draws: int = 10
    mc_draws: int = 24
    seed: int = 0
    confidence: float = 0.95

    @property
    def draws(self) -> int:
        return self.first_rounds * self.second_draws


@dataclass
class _Tally:
    """Per (strategy, estimator, quantity, budget): the combined estimates of every draw."""

    means: list[np.ndarray] = field(default_factory=list)
    variances: list[np.ndarray] = field(default_factory=list)
    labelled: list[np.ndarray] = field(default_factory=list)


def full_verdict(values: np.ndarray, names: Sequence[str], confidence: float) -> str:
    """The verdict of every label: the normal interval of the mean difference over all
    queries excludes 0 (the first system better when positive), else a tie."""
    estimate = classical_mean(list(values), confidence)
    return _verdict(estimate.low, estimate.high, names)


def _verdict(low: float, high: float, names: Sequence[str]) -> str:
    if low > 0:
        return names[0]
    if high < 0:
        return names[1]
    return TIE


def simulate(case: Case, settings: Settings) -> dict[str, Any]:
    """The measured table of `case` under `settings` (module docstring)."""
    if len(case.compared.systems) != 2:
        raise ValueError("a simulation compares two systems")
    rng = np.random.default_rng(settings.seed)
    n = case.compared.n
    quantities = case.quantities()
    names = case.compared.systems
    verdict = full_verdict(quantities[DIFFERENCE], names, settings.confidence)
    first_prediction = (
        judged_values(case.compared, case.metric, case.k, case.pair_judged)
        if case.pair_judged is not None
        else None
    )
    dis = disagreement(case.compared, case.metric, case.k, case.contrast)
    tallies: dict[tuple[str, str, str, int], _Tally] = {}
    shares = [settings.first_share, 1 - settings.first_share]
    with progress(
        "simulating label plans", len(settings.budgets) * settings.first_rounds, "first round"
    ) as bar:
        for budget in settings.budgets:
            if not 0 < budget <= n:
                raise ValueError(f"budget {budget} outside 1..{n} queries")
            first_budget = settings.first_share * budget
            pi1 = np.full(n, first_budget / n)
            for _ in range(settings.first_rounds):
                s1 = poisson_draws(pi1, rng)[0]
                round1 = _first_round(case, quantities, first_prediction, s1, pi1)
                pair_p, drawn = _calibrated(case, s1, rng, settings.mc_draws)
                f2 = drawn.mean(axis=0)  # (S, N): the judge's expected metric
                predictions = {DIFFERENCE: case.contrast @ f2}
                predictions.update({system: f2[i] for i, system in enumerate(names)})
                ols = fitted_coefficients(predictions[DIFFERENCE], quantities[DIFFERENCE], s1)
                diff_draws = np.einsum("s,msn->mn", case.contrast, drawn)
                active = active_weights(
                    diff_draws, float(ols[0]), float(ols[1]), predictions[DIFFERENCE]
                )
                squared_error = (
                    (diff_draws - (ols[0] * predictions[DIFFERENCE] + ols[1])) ** 2
                ).mean(axis=0)
                rest = ~s1
                for strategy in settings.strategies:
                    strategy_weights = {
                        UNIFORM: None,
                        DISAGREEMENT: dis,
                        UNCERTAINTY: uncertainty_weights(case.compared.pair_query, pair_p, n),
                        ACTIVE: active,
                    }[strategy]
                    pi2, pi_design = round_design(
                        strategy_weights, rest, budget - first_budget, settings.floor
                    )
                    s2 = s1 | poisson_draws(np.where(rest, pi2, 0.0), rng, settings.second_draws)
                    weights = planned_weights(squared_error, [pi1, pi2], shares)
                    labelled = s2.sum(axis=1)
                    for quantity, y in quantities.items():
                        for estimator in ESTIMATORS:
                            use = estimator == PPI
                            f = predictions[quantity] if use else np.zeros(n)
                            lam_q, c_q = fitted_coefficients(f, y, s1, use, pi_design)
                            m2, v2 = difference_estimate(f, y, s2, pi2, lam_q, c_q)
                            m1, v1 = round1[(estimator, quantity)]
                            mean, var = combine_rounds([m1, m2], [v1, v2], weights)
                            tally = tallies.setdefault(
                                (strategy, estimator, quantity, budget), _Tally()
                            )
                            tally.means.append(mean)
                            tally.variances.append(var)
                            tally.labelled.append(labelled)
                bar.update(1)
            _one_round(case, quantities, budget, settings, tallies)
    from scipy.stats import norm  # imported here: scipy.stats costs most of an app's start

    z = float(norm.ppf(1 - (1 - settings.confidence) / 2))
    rows = []
    for (strategy, estimator, quantity, budget), tally in tallies.items():
        mean = np.concatenate(tally.means)
        var = np.concatenate(tally.variances)
        theta = float(quantities[quantity].mean())
        defined = np.isfinite(var)
        half = z * np.sqrt(np.where(defined, var, np.inf))
        row: dict[str, Any] = {
            "strategy": strategy,
            "estimator": estimator,
            "quantity": quantity,
            "budget": budget,
            "draws": len(mean),
            "labelled": float(np.concatenate(tally.labelled).mean()),
            "width": float(2 * half[defined].mean()) if defined.any() else math.nan,
            "coverage": float(np.mean(np.abs(mean - theta) <= half)),
            "bias": float(mean.mean() - theta),
            "undefined": int((~defined).sum()),
        }
        if quantity == DIFFERENCE:
            verdicts = np.where(mean - half > 0, names[0], np.where(mean + half < 0, names[1], TIE))
            row["agreement"] = float(np.mean(verdicts == verdict))
        rows.append(row)
    return {
        "case": case.name,
        "systems": list(names),
        "metric": f"{case.metric}@{case.k}",
        "queries": n,
        "pairs": len(case.compared.pair_query),
        "truth": {q: float(v.mean()) for q, v in quantities.items()},
        "full_verdict": verdict,
        "judge_grades": case.pair_judged is not None,
        "settings": {
            "budgets": list(settings.budgets),
            "strategies": list(settings.strategies),
            "first_share": settings.first_share,
            "floor": settings.floor,
            "draws": settings.draws,
            "first_rounds": settings.first_rounds,
            "second_draws": settings.second_draws,
            "mc_draws": settings.mc_draws,
            "seed": settings.seed,
            "confidence": settings.confidence,
        },
        "rows": sorted(
            rows, key=lambda r: (r["quantity"], r["budget"], r["strategy"], r["estimator"])
        ),
    }


def _one_round(
    case: Case,
    quantities: dict[str, np.ndarray],
    budget: int,
    settings: Settings,
    tallies: dict[tuple[str, str, str, int], _Tally],
) -> None:
    """The reference (`ONE_ROUND`): `settings.draws` single rounds of uniform Poisson sampling
    at the budget, each estimated by people's labels alone (the sample mean, with the finite
    population correction), on its own generator."""
    n = case.compared.n
    pi = np.full(n, budget / n)
    sampled = poisson_draws(pi, np.random.default_rng([settings.seed, budget]), settings.draws)
    for quantity, y in quantities.items():
        mean, var = tuned_estimate(np.zeros(n), y, sampled, pi, use_prediction=False)
        tally = tallies.setdefault((ONE_ROUND, PEOPLE, quantity, budget), _Tally())
        tally.means.append(mean)
        tally.variances.append(var)
        tally.labelled.append(sampled.sum(axis=1))


def _first_round(
    case: Case,
    quantities: dict[str, np.ndarray],
    prediction: np.ndarray | None,
    sampled: np.ndarray,
    pi: np.ndarray,
) -> dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]:
    """(estimator, quantity) -> (mean, variance) of the uniform first round, coefficients tuned
    on its own labels; `prediction` (S, N) the metric under the judge's grades, or None (the
    estimate with the judge is then the people-only one)."""
    predictions = None
    if prediction is not None:
        predictions = {DIFFERENCE: case.contrast @ prediction} | {
            system: prediction[s] for s, system in enumerate(case.compared.systems)
        }
    out = {}
    for quantity, y in quantities.items():
        people = tuned_estimate(np.zeros(case.compared.n), y, sampled, pi, use_prediction=False)
        out[(PEOPLE, quantity)] = people
        if predictions is None:
            out[(PPI, quantity)] = people
        else:
            out[(PPI, quantity)] = tuned_estimate(predictions[quantity], y, sampled, pi)
    return out


def _calibrated(
    case: Case, labelled_queries: np.ndarray, rng: np.random.Generator, draws: int
) -> tuple[np.ndarray, np.ndarray]:
    """(each pair's calibrated probability, the metric under `draws` label draws (M, S, N)),
    calibrated on the pairs of `labelled_queries`."""
    labelled = labelled_queries[case.compared.pair_query]
    relevant, pairs = cell_counts(case.pair_cell, case.pair_relevant, labelled)
    assert relevant.shape == (N_CELLS,)
    pair_p = probabilities(relevant, pairs)[case.pair_cell]
    return pair_p, drawn_values(case.compared, case.metric, case.k, pair_p, rng, draws)


def labels_needed(result: dict[str, Any], quantity: str = DIFFERENCE) -> list[dict[str, Any]]:
    """For each budget b, the queries each (strategy, estimator) needs to reach the width that
    uniform sampling without the judge reaches at b (one round, `ONE_ROUND`, where simulated;
    else the two-round uniform plan's people estimate): log-log interpolation of its width
    against the queries it labelled, over the simulated budgets (None outside their range)."""
    rows = [r for r in result["rows"] if r["quantity"] == quantity]
    curves: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for r in rows:
        if math.isfinite(r["width"]):
            curves.setdefault((r["strategy"], r["estimator"]), []).append(
                (r["labelled"], r["width"])
            )
    baseline = ONE_ROUND if any(r["strategy"] == ONE_ROUND for r in rows) else UNIFORM
    reference = {
        r["budget"]: r for r in rows if r["strategy"] == baseline and r["estimator"] == PEOPLE
    }
    out = []
    for budget, ref in sorted(reference.items()):
        for (strategy, estimator), points in sorted(curves.items()):
            if (strategy, estimator) == (baseline, PEOPLE):
                continue
            needed = _interpolate(sorted(points), ref["width"])
            out.append(
                {
                    "budget": budget,
                    "reference_width": ref["width"],
                    "reference_labelled": ref["labelled"],
                    "strategy": strategy,
                    "estimator": estimator,
                    "needed": needed,
                    "saving": None if needed is None else 1 - needed / ref["labelled"],
                }
            )
    return out


def _interpolate(points: Sequence[tuple[float, float]], width: float) -> float | None:
    """The labelled count at which the (labelled, width) curve reaches `width`, log-log
    between the two simulated budgets around it; None outside the simulated range."""
    xs = np.log([p[0] for p in points])
    ws = np.log([p[1] for p in points])
    target = math.log(width)
    for i in range(len(points) - 1):
        hi, lo = ws[i], ws[i + 1]
        if lo <= target <= hi and hi != lo:
            t = (hi - target) / (hi - lo)
            return float(math.exp(xs[i] + t * (xs[i + 1] - xs[i])))
    return None
