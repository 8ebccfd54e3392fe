"""The Pareto front of quality against a cost, with quality compared by significance.

"Is the 0.02 nDCG worth 40 ms per query?" A configuration is *dominated* by another that is

* cheaper (strictly lower cost) and not significantly worse than it, or
* as cheap (equal cost) and significantly better,

where "significantly better" is the corrected pairwise test of the tiers (`scoring.tiers`:
X beats Y). The front is every measured configuration no other dominates, cheapest first: the
configurations worth choosing between. A mean difference the data cannot separate does not
keep an expensive configuration on the front. A configuration without a cost measurement is
left out of the front and listed as unmeasured. Costs are compared as measured, on one run
(latency differences within the machine's noise can decide; the tables print the values).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any


def dominates(
    y: str, x: str, cost: Mapping[str, float], beats: Collection[tuple[str, str]]
) -> bool:
    """Whether `y` dominates `x` (module docstring); `beats` holds (winner, loser) pairs."""
    if cost[y] < cost[x]:
        return (x, y) not in beats
    return cost[y] == cost[x] and (y, x) in beats


def pareto_front(
    cost: Mapping[str, float | None], beats: Collection[tuple[str, str]]
) -> dict[str, Any]:
    """`front` (cheapest first), `dominated_by` (each dominated configuration -> those that
    dominate it) and `unmeasured` (no cost)."""
    measured = {label: float(c) for label, c in cost.items() if c is not None}
    dominated_by = {
        x: [y for y in measured if y != x and dominates(y, x, measured, beats)] for x in measured
    }
    front = sorted((x for x in measured if not dominated_by[x]), key=lambda x: measured[x])
    return {
        "front": front,
        "dominated_by": {x: ys for x, ys in dominated_by.items() if ys},
        "unmeasured": [label for label, c in cost.items() if c is None],
    }
