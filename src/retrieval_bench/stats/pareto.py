"""The Pareto front of quality against a cost, with quality compared by significance.

"Is the 0.02 nDCG worth 40 ms per query?" A configuration is *dominated* when another is
cheaper and not significantly worse (or as cheap and significantly better), where
"significantly better" is the corrected pairwise test of the tiers (`stats.tiers`: X beats Y).

"Not significantly worse" is not transitive, so dominance is not either: with A cheapest, B
dearer and C dearest, C may beat A while B beats neither and C does not beat B; B (cheaper than
C, not worse) would knock C out, and A (cheaper than B, not worse) would knock B out, leaving
A alone on the front though C is significantly better than it. So the front is built cheapest
first, and only front members dominate:

1. Configurations are taken in order of cost, those of equal cost together.
2. A configuration is dominated by every front member (all cheaper) that it does not beat;
   among the configurations of one cost that no front member dominates, one is dominated by any
   other of them that beats it.
3. What is not dominated joins the front.

Each front member is thus significantly better than every cheaper front member: a chain of
improvements each worth its cost. A configuration without a cost measurement is left out and
listed as unmeasured. Costs are compared as measured, on one run (latency differences within
the machine's noise can decide; the tables print the values).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any


def pareto_front(
    cost: Mapping[str, float | None], beats: Collection[tuple[str, str]]
) -> dict[str, Any]:
    """`front` (cheapest first), `dominated_by` (each dominated configuration -> the
    configurations that dominate it) and `unmeasured` (no cost); `beats` holds the
    (winner, loser) pairs of the significant tests."""
    measured = {label: float(c) for label, c in cost.items() if c is not None}
    front: list[str] = []
    dominated_by: dict[str, list[str]] = {}
    for value in sorted(set(measured.values())):
        group = [x for x, c in measured.items() if c == value]
        for x in group:
            by = [f for f in front if (x, f) not in beats]
            if by:
                dominated_by[x] = by
        survivors = [x for x in group if x not in dominated_by]
        for x in survivors:
            by = [y for y in survivors if (y, x) in beats]
            if by:
                dominated_by[x] = by
        front += [x for x in survivors if x not in dominated_by]
    return {
        "front": front,
        "dominated_by": dominated_by,
        "unmeasured": [label for label, c in cost.items() if c is None],
    }
