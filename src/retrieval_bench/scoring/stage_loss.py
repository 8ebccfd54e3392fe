"""Where labelled passages were lost: for each relevant passage of each scored query, the first
stage of the pipeline whose ranking no longer holds it.

The checkpoints, in pipeline order: `pool` (the union of every arm's candidate pool: a passage
missing there was never retrieved), then each later stage the job recorded (`fused`, `rerank`,
`final`, `context`). A passage present in the pool but absent from `rerank` was lost by the
reranker's depth cut or order (the rerank stage holds only its top `depth`); absent from `final`,
by the top_k cut; absent from `context`, by the budget or the per-document cap. A passage in the
last checkpoint is `kept`. Every stage after the pool holds a subset of the one before, so the
first absence is where it was lost.

Fed from recorded rankings only (`{query id: {stage: ids}}`, in recorded order) and the
judgements, so it works for stored rankings as for a fresh job; counted overall and per query
type, with the lost passages per query for tracing a number back.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from retrieval_bench.scoring.labels import UNKNOWN_TYPE, Judgements

POOL = "pool"
KEPT = "kept"


def checkpoints(
    rankings: Mapping[str, Mapping[str, Sequence[str]]], later: Collection[str]
) -> list[str]:
    """`pool`, then the stages of `later` that some query recorded, in recorded order."""
    names: dict[str, None] = {}
    for stages in rankings.values():
        for name in stages:
            if name in later:
                names.setdefault(name, None)
    return [POOL, *names]


def lost_at(
    relevant: Collection[str], stages: Mapping[str, Sequence[str]], order: Sequence[str]
) -> dict[str, str]:
    """Each relevant id -> the first checkpoint of `order` (`pool` first) whose ranking lacks
    it, or `kept`. The pool is the union of the stages not in `order`; a later checkpoint the
    query did not record is passed over (nothing was lost there)."""
    pool = {pid for name, ids in stages.items() if name not in order for pid in ids}
    present = [(POOL, pool)] + [(name, set(stages[name])) for name in order[1:] if name in stages]
    out = {}
    for pid in relevant:
        out[pid] = next((name for name, ids in present if pid not in ids), KEPT)
    return out


def stage_loss(
    rankings: Mapping[str, Mapping[str, Sequence[str]]],
    judgements: Judgements,
    later: Collection[str],
) -> dict[str, Any]:
    """The lost-at counts of a job (layout: the keys below). `rankings`: query id -> stage name
    -> ids, each query's stages in the order the pipeline recorded them; `later`: the names of
    the stages after the arms (every other recorded stage is an arm, part of the pool)."""
    order = checkpoints(rankings, later)
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
        where = lost_at(relevant, rankings[qid], order)
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
