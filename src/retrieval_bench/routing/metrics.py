"""Measure the router itself: routed type against the labelled `query_type`, and whether the
routed pipeline beat each single retriever, per type, on the same queries.

A route *serves* the labelled types its config names (by default its own name); the default
route also serves every type no other reachable route serves. A query is routed correctly when
its route serves its labelled type, so accuracy needs no relevance labels and counts every query.

Layout of `metrics.json["router"]`:

    {
      "rules": [...], "default_route": r, "serves": {"<route>": [types]},
      "routes": {"<route>": {"strategy": s, "arms": [...], "combine": c, "exclude": b}},
      "confusion": {"<labelled type>": {"<route>": n}},       # rows labelled, columns routed
      "accuracy": {"overall": a, "n": n, "correct": c,
                   "by_type": {"<type>": {"accuracy": a, "n": n, "correct": c}},
                   "by_route": {"<route>": {"precision": p, "n": n, "correct": c}}},
      "counts": {"by_route": {...}, "by_rule": {...}, "default": n, "default_no_signal": n},
      "exclusions": {"queries": n, "violations": [...]},       # parsed exclusions honoured?
      "negative_leak": {"k": K, "n": n, "<system>": {"rate": r, "queries": [qids]}},
      "comparison": {"metrics": [...], "systems": [...], "by_type": {...}, "overall": {...}},
      "ceiling": {...},            # oracle, CV-fixed, captured share: see scoring.ceiling
      "settings": {"thresholds": {"<key>": v}, "tuned_on_evalset": {"<key>": v}},
    }
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from retrieval_bench.records import Passage, QueryRecord
from retrieval_bench.routing.ceiling import routing_ceiling
from retrieval_bench.routing.rules import DEFAULT_RULE, RuleSet

ROUTED = "routed"


def serves(rule_set: RuleSet, labelled_types: Sequence[str]) -> dict[str, list[str]]:
    """Which labelled types each reachable route serves (the default absorbs the unclaimed)."""
    reachable = rule_set.reachable()
    served = {r: list(rule_set.routes[r].serves) for r in reachable}
    claimed = {t for r in reachable if r != rule_set.default_route for t in served[r]}
    extra = [t for t in sorted(set(labelled_types)) if t not in claimed]
    default = served[rule_set.default_route]
    served[rule_set.default_route] = list(dict.fromkeys([*default, *extra]))
    return served


def _rate(correct: int, n: int) -> float | None:
    return correct / n if n else None


def routing_accuracy(
    records: Sequence[QueryRecord], served: Mapping[str, Sequence[str]]
) -> dict[str, Any]:
    confusion: dict[str, Counter[str]] = defaultdict(Counter)
    by_type: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    by_route: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for record in records:
        labelled, route = record.query.query_type, str(record.route)
        confusion[labelled][route] += 1
        ok = int(labelled in served.get(route, ()))
        by_type[labelled][0] += ok
        by_type[labelled][1] += 1
        by_route[route][0] += ok
        by_route[route][1] += 1
    correct = sum(c for c, _ in by_type.values())
    return {
        "confusion": {t: dict(sorted(confusion[t].items())) for t in sorted(confusion)},
        "accuracy": {
            "overall": _rate(correct, len(records)),
            "n": len(records),
            "correct": correct,
            "by_type": {
                t: {"accuracy": _rate(c, n), "n": n, "correct": c}
                for t, (c, n) in sorted(by_type.items())
            },
            "by_route": {
                r: {"precision": _rate(c, n), "n": n, "correct": c}
                for r, (c, n) in sorted(by_route.items())
            },
        },
    }


def routing_counts(records: Sequence[QueryRecord]) -> dict[str, Any]:
    """How often each route and rule fired; default-route queries with no signal at all."""
    default = [r for r in records if r.rule == DEFAULT_RULE]
    return {
        "by_route": dict(sorted(Counter(str(r.route) for r in records).items())),
        "by_rule": dict(sorted(Counter(str(r.rule) for r in records).items())),
        "default": len(default),
        "default_no_signal": sum(
            1 for r in default if not r.parsed.entities and not r.parsed.negation_cues
        ),
    }


def _entity_passages(passages: Sequence[Passage]) -> dict[str, frozenset[str]]:
    return {p.id: frozenset(p.meta.get("entities") or ()) for p in passages}


def exclusion_check(
    records: Sequence[QueryRecord], entities: Mapping[str, frozenset[str]]
) -> dict[str, Any]:
    """Every query whose filter applied exclusions: does any stage still hold an excluded
    entity's passage (`entities`: passage id -> its entities)? Each such (query, stage,
    passage) is listed; the list should be empty."""
    checked, violations = 0, []
    for record in records:
        if "exclusions" not in record.filter.applied:
            continue
        checked += 1
        banned = set(record.parsed.excluded_entities)
        for stage, ranking in record.stages.items():
            for pid in ranking.ids:
                if entities.get(pid, frozenset()) & banned:
                    violations.append(
                        {"query_id": record.query.query_id, "stage": stage, "id": pid}
                    )
    return {"queries": checked, "violations": violations}


def negative_leak(
    records: Sequence[QueryRecord], entities: Mapping[str, frozenset[str]], k: int
) -> dict[str, Any]:
    """Queries with labelled `negative_entities`: share whose top k holds a passage about one,
    for the routed final stage and each baseline (labels, not the parse, decide)."""
    labelled = [r for r in records if r.query.negative_entities]
    out: dict[str, Any] = {"k": k, "n": len(labelled)}
    systems = [ROUTED, *(labelled[0].baselines if labelled else ())]
    for system in systems:
        leaked = []
        for record in labelled:
            stage = record.stages["final"] if system == ROUTED else record.baselines[system]
            banned = set(record.query.negative_entities)
            if any(entities.get(pid, frozenset()) & banned for pid in stage.ids[:k]):
                leaked.append(record.query.query_id)
        out[system] = {"rate": _rate(len(leaked), len(labelled)), "queries": leaked}
    return out


def comparison(
    final: Mapping[str, Any], baselines: Mapping[str, Mapping[str, Any]], metrics: Sequence[str]
) -> dict[str, Any]:
    """Routed final stage beside each baseline, per labelled type: copied from `stages.final`
    and `baselines.<name>` so the report reads one place; every value is traceable there."""
    systems = {ROUTED: final, **baselines}

    def row(qtype: str | None) -> dict[str, Any]:
        entry: dict[str, Any] = {}
        for name, stage in systems.items():
            values = stage["overall"] if qtype is None else stage["by_type"].get(qtype, {})
            entry.setdefault("n", values.get("n", 0))
            entry[name] = {m: values.get(m) for m in metrics}
        return entry

    return {
        "metrics": list(metrics),
        "systems": list(systems),
        "by_type": {t: row(t) for t in sorted(final["by_type"])},
        "overall": row(None),
    }


def router_metrics(
    records: Sequence[QueryRecord],
    rule_set: RuleSet,
    passages: Sequence[Passage],
    stage_metrics: Mapping[str, Any],
    k: int,
) -> dict[str, Any]:
    served = serves(rule_set, [r.query.query_type for r in records])
    entities = _entity_passages(passages)
    metrics = [f"recall@{k}", f"ndcg@{k}", f"hit@{k}", f"mrr@{k}"]
    return {
        "source": rule_set.source,
        "rules": [{"route": r.route, "when": r.when} for r in rule_set.rules],
        "default_route": rule_set.default_route,
        "routes": {
            name: {
                "strategy": route.strategy.name,
                "arms": list(route.strategy.arms),
                "combine": route.strategy.combine,
                "exclude": route.strategy.exclude,
            }
            for name, route in rule_set.routes.items()
            if name in served
        },
        "serves": served,
        **routing_accuracy(records, served),
        "counts": routing_counts(records),
        "exclusions": exclusion_check(records, entities),
        "negative_leak": negative_leak(records, entities, k),
        "comparison": comparison(
            stage_metrics["stages"]["final"], stage_metrics.get("baselines", {}), metrics
        ),
        "ceiling": routing_ceiling(
            {
                ROUTED: stage_metrics["stages"]["final"]["per_query"],
                **{n: b["per_query"] for n, b in stage_metrics.get("baselines", {}).items()},
            },
            ROUTED,
            metrics,
            rule_set.ceiling_folds,
            rule_set.ceiling_seed,
            types=sorted(stage_metrics["stages"]["final"]["by_type"]),
        ),
        "settings": {"thresholds": rule_set.thresholds(), "tuned_on_evalset": rule_set.tuned},
    }
