"""The held-out estimate from per-query values: the folds, each fold's scores, the tuned figure
against the held-out one and their gap (overall and per query type), and the held-out
comparison with the baseline by the project's paired test.

Definitions (also in docs/how-to/tune.md and tune.json's `definitions`):

* `train_score` of a fold: the best value its search found on the other folds' queries;
* `test_score` of a fold: its chosen configuration's mean on the fold's own queries, which its
  search never saw;
* `held_out_score`: the mean over folds of `test_score` (per type: the mean over folds of the
  chosen configuration's mean on the fold's queries of that type);
* `tuned_score`: the best value the search on all queries found, scored on those same queries:
  the figure a sweep reports, optimistic by the amount the choice fitted those queries;
* `gap` = `tuned_score` - `held_out_score`: how much of the tuned figure did not survive on
  unseen queries (for a lower-is-better metric the sign is reversed, so a positive gap is
  always optimism).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from retrieval_bench.stats.settings import SignificanceSettings
from retrieval_bench.stats.verdicts import ALL, delta_families, ordered_types

DEFINITIONS = {
    "train_score": "the fold's best value found on the other folds' queries",
    "test_score": "the fold's chosen configuration on the fold's own queries (never searched on)",
    "held_out_score": "mean over folds of test_score",
    "tuned_score": "best value of the search on all queries, scored on those same queries",
    "gap": "tuned_score - held_out_score (reversed for a lower-is-better metric): optimism",
}
TUNED = "tuned (held-out)"


def mean(values: Sequence[float] | np.ndarray) -> float | None:
    return float(np.mean(values)) if len(values) else None


def by_type(
    values: Mapping[str, float], qids: Sequence[str], types: Mapping[str, str]
) -> dict[str, float | None]:
    """The mean of `values` over `qids`, per query type and `all`."""
    groups: dict[str, list[float]] = {}
    for q in qids:
        groups.setdefault(types[q], []).append(values[q])
        groups.setdefault(ALL, []).append(values[q])
    return {t: mean(groups.get(t, [])) for t in ordered_types(list(groups))}


def gap(tuned: float | None, held_out: float | None, higher_is_better: bool) -> float | None:
    if tuned is None or held_out is None:
        return None
    return tuned - held_out if higher_is_better else held_out - tuned


def type_table(
    tuned: Mapping[str, float | None],
    folds_by_type: Sequence[Mapping[str, float | None]],
    counts: Mapping[str, int],
    higher_is_better: bool,
) -> dict[str, dict[str, Any]]:
    """Per type (and `all`): queries, tuned score, held-out score (mean over folds of each
    fold's test mean for the type) and their gap."""
    out = {}
    for qtype in ordered_types(list(tuned)):
        held = [f[qtype] for f in folds_by_type if f.get(qtype) is not None]
        held_out = mean([h for h in held if h is not None])
        out[qtype] = {
            "n": counts.get(qtype, 0),
            "tuned_score": tuned[qtype],
            "held_out_score": held_out,
            "gap": gap(tuned[qtype], held_out, higher_is_better),
        }
    return out


def baseline_comparison(
    tuned_held_out: Mapping[str, float],
    baseline: Mapping[str, float],
    types: Mapping[str, str],
    settings: SignificanceSettings,
    min_queries: int,
) -> dict[str, dict[str, Any]]:
    """Per type and `all`: each query's held-out tuned value (its fold's choice) against the
    baseline's on the same query, by the paired sign-flip test, adjusted over every type of
    the table at once (`compare.correction`)."""
    groups: dict[str, list[str]] = {ALL: list(tuned_held_out)}
    for q in tuned_held_out:
        groups.setdefault(types[q], []).append(q)
    cells = {
        qtype: (
            {q: baseline[q] for q in groups[qtype]},
            {TUNED: {q: tuned_held_out[q] for q in groups[qtype]}},
        )
        for qtype in ordered_types(list(groups))
    }
    deltas = delta_families(cells, settings, min_queries, family_of=lambda _: None,
                            family_name="table")  # fmt: skip
    return {qtype: rows[0].to_json() for qtype, rows in deltas.items()}
