"""Where labelled passages were lost: for each relevant passage of each scored query, the first
stage of the pipeline whose ranking no longer holds it.

The checkpoints, in pipeline order: `pool` (the union of every arm's candidate pool: a passage
missing there was never retrieved), then each later stage the job recorded (`fused`, `rerank`,
`final`, `context`). A passage present in the pool but absent from `rerank` was lost by the
reranker's depth cut or order (the rerank stage holds only its top `depth`); absent from `final`,
by the top_k cut; absent from `context`, by the budget or the per-document cap. A passage in the
last checkpoint is `kept`. Every stage after the pool holds a subset of the one before, so the
first absence is where it was lost.

Which recorded stages are arms follows from the order the pipeline records them in: each arm's
pool, then `fused` when there are several arms, then the later stages. So a query's pool is
every stage before `fused`, or its first stage when it has no `fused` (one arm). Fed from
recorded rankings only (`{query id: {stage: ids}}`, in recorded order) and the judgements, so it
works for stored rankings as for a fresh job; counted overall and per query type, with the lost
passages per query for tracing a number back.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from retrieval_bench.scoring.labels import UNKNOWN_TYPE, Judgements

POOL = "pool"
KEPT = "kept"
FUSED = "fused"


def split_pool(stages: Sequence[str]) -> tuple[list[str], list[str]]:
    """(arm stages, later stages) of one query's recorded stage names, in recorded order."""
    names = list(stages)
    cut = names.index(FUSED) if FUSED in names else min(1, len(names))
    return names[:cut], names[cut:]


def checkpoints(rankings: Mapping[str, Mapping[str, Sequence[str]]]) -> list[str]:
    """`pool`, then every later stage some query recorded, in recorded order."""
    names: dict[str, None] = {}
    for stages in rankings.values():
        names.update(dict.fromkeys(split_pool(list(stages))[1]))
    return [POOL, *names]


def lost_at(relevant: Collection[str], stages: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """Each relevant id -> the first checkpoint whose ranking lacks it (`pool`: the union of the
    arms' pools), or `kept` when the query's last stage holds it."""
    arms, later = split_pool(list(stages))
    pool = {pid for name in arms for pid in stages[name]}
    present = [(POOL, pool)] + [(name, set(stages[name])) for name in later]
    return {pid: next((n for n, ids in present if pid not in ids), KEPT) for pid in relevant}


def stage_loss(
    rankings: Mapping[str, Mapping[str, Sequence[str]]], judgements: Judgements
) -> dict[str, Any]:
    """The lost-at counts of a job (layout: the keys below). `rankings`: query id -> stage name
    -> ids, each query's stages in the order the pipeline recorded them."""
    order = checkpoints(rankings)
    columns = [*order, KEPT]

    def empty() -> dict[str, Any]:
        return {"queries": 0, "labelled": 0, "lost_at": dict.fromkeys(columns, 0)}

    overall = empty()
    by_type: dict[str, dict[str, Any]] = {}
    per_query: dict[str, dict[str, list[str]]] = {}
    for qid, labels in judgements.qrels.items():
        if qid not in rankings:
            continue
        relevant = sorted(pid for pid, grade in labels.items() if grade > 0)
        where = lost_at(relevant, rankings[qid])
        group = by_type.setdefault(judgements.query_types.get(qid, UNKNOWN_TYPE), empty())
        for counts in (overall, group):
            counts["queries"] += 1
            counts["labelled"] += len(relevant)
            for stage in where.values():
                counts["lost_at"][stage] += 1
        lost: dict[str, list[str]] = {}
        for pid, stage in where.items():
            if stage != KEPT:
                lost.setdefault(stage, []).append(pid)
        if lost:
            per_query[qid] = lost
    return {
        "checkpoints": order,
        "rule": "each labelled relevant passage counted at the first checkpoint lacking it; "
        "pool = union of the arms' candidate pools",
        "overall": overall,
        "by_type": dict(sorted(by_type.items())),
        "per_query": per_query,
    }
