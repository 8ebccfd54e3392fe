"""The routing ceiling: how much could routing gain on this evaluation set, and how much of it
did the router capture?

A router job runs, on every query, the strategy its route chose (`routed`) and every single
retriever alone (the baselines). From their per-query values this module computes, per
labelled type and overall, on exactly the queries the routed result was scored on:

- `oracle`: per query, the best value any strategy run on that query reached, averaged. What a
  router that always picked the right strategy could reach; no router over these strategies
  can do better.
- `best_single`: the baseline with the best overall mean (one strategy for every query, as a
  team without a router would ship). Chosen on all queries, like the routed-vs-single table.
- `cv_fixed`: per type, the baseline with the best mean on the training folds, scored on the
  held-out fold (k-fold cross-validation over queries, stratified by type, seeded), averaged
  over every held-out query. What "send each labelled type to one fixed strategy" achieves,
  estimated without choosing on the queries it is scored on. It knows each query's labelled
  type, which a deployed router has to infer.
- `captured` = (routed - best_single) / (oracle - best_single): the share of the possible gain
  over the best single strategy that the router realised (1: as good as the oracle, 0: no
  better than the best single strategy, negative: worse). Undefined when the oracle equals the
  best single strategy, i.e. no query of the group has a better strategy to route to.

Each metric is taken on its own: the oracle may pick different strategies per metric.

Layout of `metrics.json["router"]["ceiling"]`:

    {
      "metrics": [...], "folds": k, "seed": s, "candidates": [baselines],
      "best_single": {"<metric>": "<baseline>"},
      "by_type": {"<type>": {"n": n, "folds": k used, "note": str | None,
                             "<metric>": {"routed": x, "best_single": x, "oracle": x,
                                          "cv_fixed": x, "cv_choices": [per fold],
                                          "captured": x, "undefined": {"<key>": reason}}}},
      "overall": {"n": n, "<metric>": {... without cv_choices}},
    }
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

NO_QUERIES = "no scored queries"


def assign_folds(query_types: Mapping[str, str], folds: int, seed: int) -> dict[str, int]:
    """Each query's held-out fold, stratified by type: the query ids (sorted, so the input's
    order does not matter) are shuffled once with `seed`; within each type, the i-th query in
    that order goes to fold i mod `folds`. Fold sizes within a type differ by at most one; a
    type with fewer queries than folds fills only its first folds (leave-one-out)."""
    if folds < 2:
        raise ValueError(f"folds must be at least 2, got {folds}")
    qids = sorted(query_types)
    order = np.random.default_rng(seed).permutation(len(qids))
    seen: dict[str, int] = {}
    out: dict[str, int] = {}
    for i in order.tolist():
        qid = qids[i]
        position = seen.get(query_types[qid], 0)
        seen[query_types[qid]] = position + 1
        out[qid] = position % folds
    return out


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values))


def _best(candidates: Sequence[str], mean_of: Mapping[str, float]) -> str:
    """The candidate with the highest mean; on a tie the first in `candidates` order."""
    best = candidates[0]
    for name in candidates[1:]:
        if mean_of[name] > mean_of[best]:
            best = name
    return best


def cross_validated_choice(
    values: Mapping[str, Mapping[str, float]],
    candidates: Sequence[str],
    fold_of: Mapping[str, int],
) -> tuple[dict[str, float], list[str]]:
    """For one group of queries: each query's held-out value and the strategy chosen per fold.

    `values[strategy][qid]`. For each fold f, the strategy is chosen on the queries outside f
    only (best mean, ties to the first candidate) and evaluated on the queries in f."""
    qids = list(fold_of)
    held_out: dict[str, float] = {}
    choices: list[str] = []
    for fold in sorted(set(fold_of.values())):
        train = [q for q in qids if fold_of[q] != fold]
        test = [q for q in qids if fold_of[q] == fold]
        if not train:
            raise ValueError("a fold has no training queries")
        chosen = _best(candidates, {s: _mean([values[s][q] for q in train]) for s in candidates})
        choices.append(chosen)
        held_out.update((q, values[chosen][q]) for q in test)
    return held_out, choices


def _captured(
    routed: Sequence[float], best: Sequence[float], oracle: Sequence[float], best_name: str
) -> tuple[float | None, str | None]:
    """(routed - best) / (oracle - best), from per-query differences so that a group where the
    best single strategy is the oracle on every query gives exactly 0, not rounding noise."""
    possible = _mean([o - b for o, b in zip(oracle, best, strict=True)])
    if possible == 0:
        return None, (
            f"oracle = best single ({best_name}) on every query: no strategy does better on "
            "any of them, so there is no gain to capture"
        )
    return _mean([r - b for r, b in zip(routed, best, strict=True)]) / possible, None


def routing_ceiling(
    per_query: Mapping[str, Mapping[str, Mapping[str, Any]]],
    routed: str,
    metrics: Sequence[str],
    folds: int,
    seed: int,
    types: Sequence[str] = (),
) -> dict[str, Any]:
    """The layout above from per-query records: `per_query[system][qid]` holds `query_type`
    and each metric (a stage's `per_query` in metrics.json), `routed` names the routed system;
    every other system is a candidate fixed strategy and must cover every query `routed` was
    scored on. `types` lists groups to report even with no scored query."""
    scored = per_query[routed]
    candidates = [s for s in per_query if s != routed]
    if not candidates:
        raise ValueError("the routing ceiling needs at least one single strategy beside routed")
    for name in candidates:
        missing = [q for q in scored if q not in per_query[name]]
        if missing:
            raise ValueError(f"{name} has no value for scored query {missing[0]!r}")
    query_type = {q: str(record["query_type"]) for q, record in scored.items()}
    fold_of = assign_folds(query_type, folds, seed)
    systems = [routed, *candidates]
    value = {
        m: {s: {q: float(per_query[s][q][m]) for q in scored} for s in systems} for m in metrics
    }
    oracle = {m: {q: max(value[m][s][q] for s in systems) for q in scored} for m in metrics}
    best_single = {
        m: _best(candidates, {s: _mean(list(value[m][s].values())) for s in candidates})
        if scored
        else None
        for m in metrics
    }
    groups = sorted({*types, *query_type.values()})
    by_type: dict[str, Any] = {}
    held_out: dict[str, dict[str, float]] = {m: {} for m in metrics}
    cv_gaps: list[str] = []
    for group in groups:
        members = [q for q in scored if query_type[q] == group]
        used = min(folds, len(members))
        entry: dict[str, Any] = {"n": len(members), "folds": used, "note": None}
        if len(members) == 1:
            entry["note"] = "1 query: no training queries to choose a fixed strategy on"
            cv_gaps.append(group)
        elif 1 < len(members) < folds:
            entry["note"] = (
                f"{len(members)} queries, fewer than the {folds} folds: leave-one-out "
                f"({used} folds)"
            )
        for m in metrics:
            cell = _cell(members, value[m], oracle[m], best_single[m], routed)
            if len(members) > 1:
                cv, choices = cross_validated_choice(
                    {s: value[m][s] for s in candidates},
                    candidates,
                    {q: fold_of[q] for q in members},
                )
                held_out[m].update(cv)
                cell["cv_fixed"] = _mean(list(cv.values()))
                cell["cv_choices"] = choices
            else:
                cell["cv_fixed"] = None
                cell["cv_choices"] = []
                cell["undefined"]["cv_fixed"] = entry["note"] or NO_QUERIES
            entry[m] = cell
        by_type[group] = entry
    overall: dict[str, Any] = {"n": len(scored)}
    for m in metrics:
        cell = _cell(list(scored), value[m], oracle[m], best_single[m], routed)
        if cv_gaps:
            cell["cv_fixed"] = None
            cell["undefined"]["cv_fixed"] = f"undefined for type(s) {', '.join(cv_gaps)}"
        else:
            cell["cv_fixed"] = _mean(list(held_out[m].values())) if scored else None
            if not scored:
                cell["undefined"]["cv_fixed"] = NO_QUERIES
        overall[m] = cell
    return {
        "metrics": list(metrics),
        "folds": folds,
        "seed": seed,
        "candidates": candidates,
        "best_single": best_single,
        "by_type": by_type,
        "overall": overall,
    }


def _cell(
    members: Sequence[str],
    value: Mapping[str, Mapping[str, float]],
    oracle: Mapping[str, float],
    best_name: str | None,
    routed: str,
) -> dict[str, Any]:
    """routed, best single, oracle and captured for one group and metric."""
    if not members or best_name is None:
        return {
            "routed": None,
            "best_single": None,
            "oracle": None,
            "captured": None,
            "undefined": dict.fromkeys(["routed", "best_single", "oracle", "captured"], NO_QUERIES),
        }
    routed_values = [value[routed][q] for q in members]
    best_values = [value[best_name][q] for q in members]
    oracle_values = [oracle[q] for q in members]
    captured, reason = _captured(routed_values, best_values, oracle_values, best_name)
    return {
        "routed": _mean(routed_values),
        "best_single": _mean(best_values),
        "oracle": _mean(oracle_values),
        "captured": captured,
        "undefined": {"captured": reason} if reason else {},
    }
