"""The estimates a labelling plan supports, once its rounds' labels came back: each system's
metric and their paired difference (first job minus second), per query type and overall, with
the judge's prediction (the active estimate) and without it (people only), each with its normal
interval (`stats.active_ppi`).

Round t's estimate treats the queries known before it (labelled before the plan, or chosen by
an earlier round) as labelled with certainty (pi = 1) and its own chosen queries with the
probabilities it drew them with; the rounds' estimates are combined with the weights the latest
round recorded when it was drawn (each round's predicted variance, inverted:
`stats.active_ppi.planned_weights`), or, where none was recorded (no calibration yet, or one
round), the rounds' shares of the budget, fixed when the plan was made. A query type is a domain of
the population: the same estimate over its queries alone (Poisson sampling restricted to a
domain is Poisson sampling of the domain). The prediction of round t is the one the plan
recorded when it drew the round, so it cannot depend on the round's own labels.

Refused (exit 2): a plan edited since it was drawn (`plan.read_plan`), a round's pool file
whose probabilities differ from the plan's, a chosen query some of whose pairs still lack
people's grade (a missing label is not missing at random: the estimate would no longer be
unbiased). Warned, with the estimate still valid: people's labels of pairs the plan did not
send out (the estimate ignores them: it uses the queries the design chose, with the design's
probabilities; counting others would weight them as if drawn), and an estimate before every
planned round is drawn (the drawn rounds' weights renormalised: unbiased if stopping early
did not depend on what round 1 showed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from retrieval_bench.active.context import PlanContext
from retrieval_bench.active.files import ESTIMATE_JSON, ESTIMATE_MD
from retrieval_bench.active.plan import (
    DIFFERENCE,
    PEOPLE,
    WITH_JUDGE,
    check_pool_file,
    plan_context,
    quantities,
    read_plan,
    require_labels_back,
)
from retrieval_bench.io.atomic import atomic_write_json, atomic_write_text
from retrieval_bench.io.strict_json import strict_json
from retrieval_bench.reports.active_estimates import active_estimates_markdown
from retrieval_bench.stats.active_ppi import (
    as_estimate,
    combine_rounds,
    difference_estimate,
    tuned_estimate,
)

ALL = "all"
ESTIMATORS = (PEOPLE, WITH_JUDGE)
TIE = "tie"


def _values(ctx: PlanContext) -> np.ndarray:
    codes, grades = ctx.compared.label_layout(ctx.people())
    return ctx.compared.values(ctx.metric, ctx.k, codes, grades)


def _round_design(
    plan: Mapping[str, Any], number: int, queries: Sequence[str]
) -> tuple[np.ndarray, np.ndarray]:
    """(sampled, pi) of round `number` over the population (module docstring)."""
    before = set(plan["certain"])
    for record in plan["rounds"][: number - 1]:
        before.update(record["chosen"])
    record = plan["rounds"][number - 1]
    chosen = set(record["chosen"])
    sampled = np.array([q in before or q in chosen for q in queries])
    pi = np.array([1.0 if q in before else record["pi"].get(q, 1.0) for q in queries])
    return sampled, pi


def plan_weights(plan: Mapping[str, Any]) -> list[float]:
    """The drawn rounds' weights: those the latest round recorded when it was drawn (module
    docstring), else the planned budget shares of the drawn rounds, renormalised."""
    drawn = len(plan["rounds"])
    recorded = plan["rounds"][-1].get("weights")
    if recorded is not None:
        return [float(w) for w in recorded]
    shares = [float(w) for w in plan["weights"][:drawn]]
    return [w / sum(shares) for w in shares]


def outside_labels(plan: Mapping[str, Any], ctx: PlanContext) -> dict[str, int]:
    """query id -> people's labels of pairs that were open when the plan was made, on queries no
    round chose (the estimate ignores them)."""
    chosen = {q for r in plan["rounds"] for q in r["chosen"]}
    people = {q.query_id: q.people_relevance for q in ctx.queries}
    out = {}
    for qid, pids in plan["open"].items():
        if qid in chosen:
            continue
        given = sum(1 for pid in pids if pid in people.get(qid, {}))
        if given:
            out[qid] = given
    return out


def estimate_plan(folder: Path, labels: Path, confidence: float = 0.95) -> dict[str, Any]:
    """The plan's estimates against `labels` (module docstring), with the warnings."""
    plan = read_plan(folder)
    for record in plan["rounds"]:
        check_pool_file(folder if folder.is_dir() else folder.parent, plan, record)
    ctx = plan_context(plan, labels)
    require_labels_back(
        plan,
        ctx,
        plan["rounds"],
        "estimate (a chosen query without its labels is missing not at random)",
    )
    warnings = []
    ignored = outside_labels(plan, ctx)
    if ignored:
        warnings.append(
            f"{sum(ignored.values())} people's labels on {len(ignored)} queries the plan did not "
            "choose are ignored: the estimate uses the queries its design drew, with their "
            "probabilities (counting others would weight them as if drawn); it stays valid"
        )
    drawn = len(plan["rounds"])
    planned = len(plan["round_budgets"])
    weights = plan_weights(plan)
    if drawn < planned:
        warnings.append(
            f"{drawn} of {planned} planned rounds drawn: the drawn rounds' weights sum to 1; the "
            "estimate is unbiased if stopping early did not depend on what came back"
        )
    queries = list(ctx.compared.query_ids)
    types = list(ctx.compared.query_types)
    systems = list(ctx.systems)
    people = quantities(systems, _values(ctx))
    designs = [_round_design(plan, t + 1, queries) for t in range(drawn)]
    predictions: list[dict[str, np.ndarray] | None] = []
    for record in plan["rounds"]:
        given = record.get("prediction")
        f = None if given is None else np.array([given[s] for s in systems])
        predictions.append(None if f is None else quantities(systems, f))
    groups = {ALL: np.ones(len(queries), dtype=bool)}
    for t in sorted(set(types)):
        groups[t] = np.array([x == t for x in types])
    labelled = set(plan["certain"]) | {q for r in plan["rounds"] for q in r["chosen"]}
    rows = []
    for group, members in groups.items():
        n_labelled = sum(
            1 for q, m in zip(queries, members.tolist(), strict=True) if m and q in labelled
        )
        for quantity, y in people.items():
            for estimator in ESTIMATORS:
                means, variances = [], []
                for (sampled, pi), prediction, record in zip(
                    designs, predictions, plan["rounds"], strict=True
                ):
                    use = estimator == WITH_JUDGE and prediction is not None
                    f = (
                        prediction[quantity][members]
                        if use and prediction
                        else np.zeros(members.sum())
                    )
                    y_group = np.where(sampled, y, np.nan)[members]
                    s_group, pi_group = sampled[members], pi[members]
                    fitted = record.get("coefficients")
                    if fitted is None:  # round 1: tuned on its own labels
                        mean, var = tuned_estimate(f, y_group, s_group, pi_group, use)
                    else:  # fitted before the round on what came back earlier
                        lam, c = fitted[quantity][WITH_JUDGE if use else PEOPLE]
                        mean, var = difference_estimate(f, y_group, s_group, pi_group, lam, c)
                    means.append(mean)
                    variances.append(var)
                mean, var = combine_rounds(means, variances, weights)
                row: dict[str, Any] = {
                    "type": group,
                    "quantity": quantity,
                    "estimator": estimator,
                    "queries": int(members.sum()),
                    "labelled": n_labelled,
                    "uses_judge": estimator == WITH_JUDGE
                    and any(p is not None for p in predictions),
                }
                if np.isfinite(var):
                    estimate = as_estimate(
                        float(mean), float(var), confidence, n_labelled, int(members.sum())
                    )
                    row.update(estimate.to_json())
                    if quantity == DIFFERENCE:
                        row["verdict"] = (
                            systems[0]
                            if estimate.low > 0
                            else systems[1]
                            if estimate.high < 0
                            else TIE
                        )
                else:
                    row["note"] = "not estimated: too few labelled queries in this group"
                rows.append(row)
    return {
        "plan": str(folder),
        "labels": str(labels),
        "metric": plan["metric"],
        "systems": systems,
        "strategy": plan["strategy"],
        "rounds": drawn,
        "planned_rounds": planned,
        "weights": weights,
        "confidence": confidence,
        "warnings": warnings,
        "rows": rows,
    }


def write_estimate(
    folder: Path, labels: Path, confidence: float, out: Path | None
) -> tuple[str, list[Path]]:
    """Estimate the plan in `folder` and write estimate.md/.json to `out` (default the plan's
    folder); the Markdown text and the files."""
    record = estimate_plan(folder, labels, confidence)
    text = active_estimates_markdown(record)
    target = out or (folder if folder.is_dir() else folder.parent)
    atomic_write_json(target / ESTIMATE_JSON, strict_json(record))
    atomic_write_text(target / ESTIMATE_MD, text)
    return text, [target / ESTIMATE_MD, target / ESTIMATE_JSON]
