"""Rule-based routing: the first rule whose conditions hold on the parse picks the route, and the
route's strategy answers the query. Cheap and explainable, so it is measured, not hidden.

With no router every query gets the configured retriever; with `router=rules` every arm is
also run as a single retriever (the baselines) so one job answers "did routing help, and where".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from retrieval_bench.records import EvalQuery, ParsedQuery
from retrieval_bench.routing.rules import DEFAULT_RULE, Routing, Rule, RuleSet, Strategy

# Given a query and its parse, the route that answers it (build_router).
Router = Callable[[EvalQuery, ParsedQuery], Routing]


def holds(rule: Rule, parsed: ParsedQuery, short_query_length: int) -> bool:
    """Every condition the rule sets holds on the parse (conditions are ANDed)."""
    n = len(parsed.entities)
    facts: dict[str, bool] = {}
    for key, expected in rule.when.items():
        if key == "min_entities":
            facts[key] = n >= int(expected)
        elif key == "max_entities":
            facts[key] = n <= int(expected)
        elif key == "excludes":
            facts[key] = bool(parsed.excluded_entities) == expected
        elif key == "cue":
            facts[key] = bool(parsed.negation_cues) == expected
        elif key == "short":
            facts[key] = (parsed.length <= short_query_length) == expected
        else:  # the config schema admits no other key
            raise KeyError(key)
    return all(facts.values())


class RuleRouter:
    """Rules in their stated order; the first that holds wins, else the default route."""

    def __init__(self, rule_set: RuleSet) -> None:
        self.rule_set = rule_set

    def classify(self, parsed: ParsedQuery) -> tuple[str, str]:
        """(route, the rule that chose it: `rules[i]: ...` or `default`)."""
        for i, rule in enumerate(self.rule_set.rules):
            if holds(rule, parsed, self.rule_set.short_query_length):
                return rule.route, f"rules[{i}]: {rule.describe()}"
        return self.rule_set.default_route, DEFAULT_RULE

    def __call__(self, query: EvalQuery, parsed: ParsedQuery) -> Routing:
        route, rule = self.classify(parsed)
        return Routing(route, self.rule_set.routes[route].strategy, rule)


def baseline_strategies(arms: Sequence[str]) -> dict[str, Strategy]:
    """Each arm alone, and (with two or more) their RRF hybrid: the single retrievers."""
    baselines = {arm: Strategy(arm, (arm,)) for arm in arms}
    if len(arms) > 1:
        baselines["hybrid"] = Strategy("hybrid", tuple(arms), "rrf")
    return baselines


def build_router(
    rule_set: RuleSet | None, fallback: Strategy, arms: Sequence[str]
) -> tuple[Router, dict[str, Strategy]]:
    """The pipeline's `route` callable and its baselines (none without a router)."""
    if rule_set is None:
        return (lambda query, parsed: Routing(None, fallback)), {}
    return RuleRouter(rule_set), baseline_strategies(arms)
