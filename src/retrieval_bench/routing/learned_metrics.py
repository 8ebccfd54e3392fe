"""What a learned router did and how good it is, per labelled type: metrics.json's
`learned_router`, read by the report.

The learned router's values are the job's final stage: with a router learned in the job, each
labelled query was routed by a router fitted on the other folds (held out); with a saved router
applied (`router.model`), by that router (held out only for queries it was not trained on:
`seen` counts the others). Beside it, on the same queries:

- `rrf`: plain RRF of every arm (what a job without a router runs);
- `best_single`, `oracle`, `cv_fixed`, `captured`: the routing ceiling over the router's
  candidates (`routing.ceiling`: the candidate best on all queries, the per-query best
  candidate, the best candidate per labelled type chosen on the other folds, and
  captured = (learned - best single) / (oracle - best single));
- `rules`: the rules router's choice, where the job has rules;
- `tests`: the project's paired sign-flip test of the learned router against plain RRF, the
  rules router and the best single candidate (the one best on all queries; unless it is
  plain RRF), per type and
  overall, adjusted together over every test of the table (`compare.correction`).

What it learned: each feature's importance in the router fitted on every labelled query (ridge:
mean |standardised coefficient|; forest: mean decrease in impurity), how often each labelled
type went to each candidate (the routing confusion), the queries where it departs from the
rules with their outcome, and the queries that took the fallback.

Layout:

    {"mode", "metric", "candidates": [...], "fallback_strategy", "estimate": "held_out" |
     "applied", "applied": path | None, "seen": n | None, "folds": [...],
     "model": {"reference", "choice", "inner_score", "trained_on", "sklearn"} | None,
     "importances": {feature: share}, "choices": {"by_type": {type: {candidate: n}},
     "overall": {candidate: n}}, "fallback": {"n", "queries": {qid: [features]}},
     "table": {"by_type": {type: {"n", "learned", "rrf", "rules", "best_single",
     "best_single_name", "cv_fixed", "oracle", "captured", "undefined"}}, "overall": {...}},
     "tests": {"rrf": {type: delta}, "rules": {type: delta}, "best_single": {type: delta},
     "correction", "family"},
     "departures": {"n", "better", "worse", "same", "queries": [...]}, "seconds": {...}}
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from retrieval_bench.records import QueryRecord
from retrieval_bench.routing.candidates import HYBRID, RULES
from retrieval_bench.routing.ceiling import routing_ceiling
from retrieval_bench.routing.learned import RouterModel
from retrieval_bench.stats.settings import SignificanceSettings
from retrieval_bench.stats.verdicts import ALL, delta_families, ordered_types

LEARNED = "learned"
# Departures listed in full (the counts cover all).
DEPARTURES_LISTED = 30


@dataclass
class LearnedOutcome:
    """What the learned router did in one job (job.learned fills it)."""

    mode: str
    metric: str
    candidates: list[str]
    features: list[str]
    model: RouterModel | None
    # The saved router this job applied (router.model), or None: learned here.
    applied: str | None
    # Each query's candidate, and how it was chosen (`fold N`, `all labelled queries`, `saved
    # router`, `fallback`).
    chosen: dict[str, str] = field(default_factory=dict)
    how: dict[str, str] = field(default_factory=dict)
    # The rules router's strategy for each query (where the job has rules).
    rules: dict[str, str] = field(default_factory=dict)
    # Queries that took the fallback: id -> the features that could not be computed.
    fallback: dict[str, list[str]] = field(default_factory=dict)
    fallback_strategy: str = HYBRID
    folds: list[dict[str, Any]] = field(default_factory=list)
    # Labelled queries of this job a saved router was trained on (None: it did not say).
    seen: int | None = None
    seconds: dict[str, float] = field(default_factory=dict)


def learned_metrics(
    records: Sequence[QueryRecord],
    outcome: LearnedOutcome,
    stage_metrics: Mapping[str, Any],
    folds: int,
    seed: int,
    settings: SignificanceSettings,
    min_queries: int,
) -> dict[str, Any]:
    """The layout of the module docstring from the scored job (`stage_metrics`: metrics.json's
    content so far)."""
    metric = outcome.metric
    final = stage_metrics["stages"]["final"]["per_query"]
    baselines = {n: b["per_query"] for n, b in stage_metrics.get("baselines", {}).items()}
    types = sorted(stage_metrics["stages"]["final"]["by_type"])
    ceiling = routing_ceiling(
        {LEARNED: final, **{c: baselines[c] for c in outcome.candidates}},
        LEARNED,
        [metric],
        folds,
        seed,
        types=types,
    )
    values = {q: float(row[metric]) for q, row in final.items()}
    type_of = {q: str(row["query_type"]) for q, row in final.items()}
    against = {"rrf": HYBRID, **({"rules": RULES} if RULES in baselines else {})}
    best = ceiling["best_single"][metric]
    table = {
        "by_type": {
            t: _row(
                ceiling["by_type"][t],
                metric,
                [q for q in values if type_of[q] == t],
                baselines,
                against,
                ceiling["best_single"][metric],
            )
            for t in ceiling["by_type"]
        },
        "overall": _row(
            ceiling["overall"],
            metric,
            list(values),
            baselines,
            against,
            ceiling["best_single"][metric],
        ),
    }
    model = outcome.model
    return {
        "mode": outcome.mode,
        "metric": metric,
        "candidates": outcome.candidates,
        "fallback_strategy": outcome.fallback_strategy,
        "estimate": "applied" if outcome.applied else "held_out",
        "applied": outcome.applied,
        "seen": outcome.seen,
        "folds": outcome.folds,
        "model": None
        if model is None
        else {
            "reference": model.candidates[model.reference].name,
            "choice": model.choice.to_json(),
            "inner_score": model.inner_score,
            "trained_on": {
                k: v for k, v in model.trained_on.items() if k not in ("query_ids", "query_keys")
            },
            "sklearn": model.sklearn,
        },
        "importances": _importances(model, outcome.features),
        "choices": _choices(records, outcome),
        "fallback": {"n": len(outcome.fallback), "queries": outcome.fallback},
        "table": table,
        "tests": _tests(
            metric,
            values,
            type_of,
            baselines,
            {**against, **({"best_single": best} if best not in (None, HYBRID) else {})},
            settings,
            min_queries,
        ),
        "departures": _departures(metric, records, outcome, values, baselines),
        "seconds": outcome.seconds,
    }


def _row(
    cell: Mapping[str, Any],
    metric: str,
    members: Sequence[str],
    baselines: Mapping[str, Mapping[str, Mapping[str, Any]]],
    against: Mapping[str, str],
    best_name: str | None,
) -> dict[str, Any]:
    m = cell[metric]
    row: dict[str, Any] = {
        "n": cell["n"],
        "learned": m["routed"],
        "best_single": m["best_single"],
        "best_single_name": best_name,
        "cv_fixed": m["cv_fixed"],
        "oracle": m["oracle"],
        "captured": m["captured"],
        "undefined": dict(m["undefined"]),
    }
    for column, system in against.items():
        scored = [float(baselines[system][q][metric]) for q in members]
        row[column] = sum(scored) / len(scored) if scored else None
    row.setdefault("rules", None)
    return row


def _importances(model: RouterModel | None, features: Sequence[str]) -> dict[str, float]:
    if model is None:
        return {}
    weights = model.importances()
    return dict(sorted(weights.items(), key=lambda kv: (-kv[1], features.index(kv[0]))))


def _choices(records: Sequence[QueryRecord], outcome: LearnedOutcome) -> dict[str, Any]:
    """Each labelled type's queries by the candidate chosen (the routing confusion)."""
    by_type: dict[str, Counter[str]] = {}
    for record in records:
        if record.query.perturbed_from is not None:
            continue
        chosen = outcome.chosen.get(record.query.query_id, record.strategy)
        by_type.setdefault(record.query.query_type, Counter())[chosen] += 1
    overall: Counter[str] = Counter()
    for counts in by_type.values():
        overall.update(counts)
    order = [*outcome.candidates, *(c for c in overall if c not in outcome.candidates)]
    return {
        "by_type": {t: {c: by_type[t][c] for c in order if by_type[t][c]} for t in sorted(by_type)},
        "overall": {c: overall[c] for c in order if overall[c]},
    }


def _tests(
    metric: str,
    values: Mapping[str, float],
    type_of: Mapping[str, str],
    baselines: Mapping[str, Mapping[str, Mapping[str, Any]]],
    against: Mapping[str, str],
    settings: SignificanceSettings,
    min_queries: int,
) -> dict[str, Any]:
    """The learned router against each comparison, per type and overall: paired sign-flip
    tests, adjusted together over the whole table (one family), as the tuning command's
    held-out comparison is."""
    groups: dict[str, list[str]] = {ALL: list(values)}
    for q in values:
        groups.setdefault(type_of[q], []).append(q)
    cells = {}
    for column, system in against.items():
        for t in ordered_types(list(groups)):
            members = groups[t]
            base = {q: float(baselines[system][q][metric]) for q in members}
            cells[(column, t)] = (base, {LEARNED: {q: values[q] for q in members}})
    deltas = delta_families(
        cells, settings, min_queries, family_of=lambda _: None, family_name="table"
    )
    out: dict[str, Any] = {column: {} for column in against}
    for (column, t), rows in deltas.items():
        out[column][t] = rows[0].to_json()
    out["correction"] = settings.correction
    out["family"] = "every test of this table"
    return out


def _departures(
    metric: str,
    records: Sequence[QueryRecord],
    outcome: LearnedOutcome,
    values: Mapping[str, float],
    baselines: Mapping[str, Mapping[str, Mapping[str, Any]]],
) -> dict[str, Any]:
    """Labelled queries where the learned choice ranks otherwise than the rules router's
    (their top_k rankings differ: two strategies that differ only where the query does not
    reach, such as exclusions on a query that excludes nothing, do not depart), with both
    values: better, worse or the same for the learned choice."""
    if RULES not in baselines:
        return {"n": 0, "better": 0, "worse": 0, "same": 0, "mean_diff": None, "queries": []}
    rows: list[dict[str, Any]] = []
    for record in records:
        qid = record.query.query_id
        chosen = record.baselines.get(outcome.chosen.get(qid, record.strategy))
        rules = record.baselines.get(RULES)
        if qid not in values or chosen is None or rules is None or chosen.ids == rules.ids:
            continue
        rows.append(
            {
                "query_id": qid,
                "query": record.query.query,
                "query_type": record.query.query_type,
                "rules": outcome.rules.get(qid),
                "learned": outcome.chosen[qid],
                "rules_value": float(baselines[RULES][qid][metric]),
                "learned_value": values[qid],
            }
        )
    diffs = [r["learned_value"] - r["rules_value"] for r in rows]
    rows.sort(key=lambda r: (-abs(r["learned_value"] - r["rules_value"]), r["query_id"]))
    return {
        "n": len(rows),
        "better": sum(d > 0 for d in diffs),
        "worse": sum(d < 0 for d in diffs),
        "same": sum(d == 0 for d in diffs),
        "mean_diff": sum(diffs) / len(diffs) if diffs else None,
        "queries": rows[:DEPARTURES_LISTED],
    }
