"""The per-record scoring loop: a job's recorded stages (`QueryRecord`s) -> metrics.json's
`stages`, `refusal`, `stage_loss` and `baselines`. One function for a fresh job and for stored
rankings re-scored (`labels.rescore`), so both give the same numbers."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from retrieval_bench.config.refusal import RefusalConfig
from retrieval_bench.config.schema import DOC, PASSAGE
from retrieval_bench.records import QueryRecord, StageRecord, empty_rankings
from retrieval_bench.scoring.aggregate import (
    CodedLabels,
    per_query_columns,
    per_query_columns_coded,
    score_stage,
    score_stage_coded,
)
from retrieval_bench.scoring.families import ScoringContext, merge_headlines, score_families
from retrieval_bench.scoring.labels import Judgements
from retrieval_bench.scoring.metrics import pad_rankings
from retrieval_bench.scoring.refusal import choose_stage, score_refusal
from retrieval_bench.scoring.stage_loss import stage_loss
from retrieval_bench.scoring.units import doc_ranking


def stage_names(records: list[QueryRecord]) -> list[str]:
    """Every recorded stage in pipeline order: those before the top_k cut (arms, fused,
    rerank) as first seen, then `final`, then those after it (context). A router's queries
    record different arms, so the order is taken across all records."""
    before: dict[str, None] = {}
    after: dict[str, None] = {}
    for record in records:
        seen_final = False
        for name in record.stages:
            if name == "final":
                seen_final = True
            elif seen_final:
                after.setdefault(name, None)
            else:
                before.setdefault(name, None)
    return [*before, "final", *after]


def score_records(
    records: list[QueryRecord],
    judgements: Judgements,
    cutoffs: list[int],
    context: ScoringContext | None = None,
    group_by: dict[str, dict[str, str]] | None = None,
    refusal: RefusalConfig | None = None,
    passage_ids: Sequence[str] | None = None,
    doc_of: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Every stage's doc metrics; with a context also its other metric families
    (`stage["families"]`, see scoring.families) and, with a refusal config, the job's refusal
    evaluation (`metrics["refusal"]`).

    With `passage_ids` (the corpus order the pipeline's indices refer to), the doc metrics
    score each stage's passage indices (`StageRecord.indices`) through the integer core, with
    the labels coded once per job: the same numbers as scoring the ids, without touching an
    id string per ranked passage. Rankings are still checked for duplicates there (a cheap
    row-wise sort), although the pipeline makes them unique by construction.

    With `doc_of` (passage id -> document id) every ranking is scored as its documents'
    ranking against `judgements` read by document (`scoring.units`, `scoring.unit=doc`); the
    passage families (readable, leak, entities, evidence) read passage metadata and are not
    scored then. `metrics["unit"]` says which unit was scored."""
    cutoffs = sorted(set(cutoffs))
    if doc_of is not None:
        records = [doc_record(r, doc_of) for r in records]
        passage_ids = None
    doc_metrics = _doc_scorer(records, judgements, cutoffs, passage_ids)
    stages = {}
    for name in stage_names(records):
        stage_records = [r.stages.get(name) for r in records]
        stages[name] = doc_metrics(stage_records, group_by)
        stages[name]["counts"]["empty_rankings"] = empty_rankings(stage_records)
        if context is not None and doc_of is None:
            rankings = {r.query.query_id: r.stages[name].ids for r in records if name in r.stages}
            stages[name]["families"] = score_families(
                rankings, judgements, context, cutoffs, group_by
            )
            merge_headlines(stages[name])
        _flag_depth(stages[name], stage_records, cutoffs)
    unit = PASSAGE if doc_of is None else DOC
    result: dict[str, Any] = {"unit": unit, "cutoffs": cutoffs, "stages": stages}
    if context is not None and refusal is not None:
        stage = choose_stage(refusal.score_stage, [set(r.stages) for r in records])
        scores = {r.query.query_id: r.stages[stage].scores for r in records if stage in r.stages}
        result["refusal"] = score_refusal(
            scores, judgements, context.unreadable(judgements), stage, refusal.thresholds
        )
    result["stage_loss"] = stage_loss(
        {r.query.query_id: {n: s.ids for n, s in r.stages.items()} for r in records}, judgements
    )
    # Single retrievers run beside a router (see QueryRecord.baselines), scored the same way.
    baseline_names = dict.fromkeys(name for r in records for name in r.baselines)
    if baseline_names:
        result["baselines"] = {}
        for name in baseline_names:
            stage_records = [r.baselines.get(name) for r in records]
            result["baselines"][name] = doc_metrics(stage_records, None)
            result["baselines"][name]["counts"]["empty_rankings"] = empty_rankings(stage_records)
            _flag_depth(result["baselines"][name], stage_records, cutoffs)
    return result


def per_query_values(
    stages: Sequence[StageRecord],
    qids: Sequence[str],
    judgements: Judgements,
    labels: CodedLabels,
    metric: tuple[str, int],
    doc_of: Mapping[str, str] | None = None,
) -> np.ndarray:
    """One measure (name, cut-off) of each recorded ranking, query `qids[i]`'s for `stages[i]`
    (every one labelled): through the integer core as a job scores its stages (passage
    indices against `labels`), or, with `doc_of` (scoring.unit=doc), each ranking mapped to
    documents first, as `score_records` does."""
    name, k = metric
    if doc_of is None:
        rows = np.array([labels.row_of[q] for q in qids], dtype=np.int64)
        columns = per_query_columns_coded(
            pad_rankings([np.asarray(s.indices) for s in stages]),
            labels.ids[rows],
            labels.grades[rows],
            [k],
            only={name},
        )
    else:
        ids = [doc_stage(s, doc_of).ids for s in stages]
        qrels = [judgements.qrels[q] for q in qids]
        columns = per_query_columns(ids, qrels, [k], list(qids), only={name})
    return np.asarray(columns[f"{name}@{k}"], dtype=np.float64)


def doc_stage(stage: StageRecord, doc_of: Mapping[str, str]) -> StageRecord:
    """One recorded stage as its documents' ranking (`scoring.units.doc_ranking`)."""
    ids, scores = doc_ranking(stage.ids, stage.scores, doc_of)
    return replace(stage, ids=ids, scores=scores, pool_returned=len(ids), indices=None)


def doc_record(record: QueryRecord, doc_of: Mapping[str, str]) -> QueryRecord:
    """Every stage and baseline of a query's record as document rankings."""
    return replace(
        record,
        stages={name: doc_stage(s, doc_of) for name, s in record.stages.items()},
        baselines={name: doc_stage(s, doc_of) for name, s in record.baselines.items()},
    )


def _flag_depth(
    stage: dict[str, Any], lists: Sequence[StageRecord | None], cutoffs: Sequence[int]
) -> None:
    """Mark the cut-offs deeper than the longest list the stage was asked for (`top_k` for
    `final`): a metric there is not measured at that depth (recall@10 of a 6-long list is
    recall@6, precision@10 counts 4 empty places), so reports flag it instead of showing it
    as if it were (`stage["depth_exceeds_list"]`)."""
    length = max((s.pool_requested for s in lists if s is not None), default=0)
    deeper = [k for k in cutoffs if k > length]
    if deeper:
        stage["depth_exceeds_list"] = {"list_length": length, "cutoffs": deeper}


def _doc_scorer(
    records: list[QueryRecord],
    judgements: Judgements,
    cutoffs: list[int],
    passage_ids: Sequence[str] | None,
) -> Callable[[list[StageRecord | None], dict[str, dict[str, str]] | None], dict[str, Any]]:
    """score_stage for one stage (given as each record's StageRecord or None), by passage
    indices when every record carries them and the corpus order is known, else by ids."""
    qids = [r.query.query_id for r in records]
    indexed = passage_ids is not None and all(
        stage.indices is not None
        for r in records
        for stage in (*r.stages.values(), *r.baselines.values())
    )
    if not indexed:

        def by_ids(
            stages: list[StageRecord | None], group_by: dict[str, dict[str, str]] | None
        ) -> dict[str, Any]:
            rankings = {q: s.ids for q, s in zip(qids, stages, strict=True) if s is not None}
            return score_stage(rankings, judgements, cutoffs, group_by)

        return by_ids
    labels = CodedLabels.build(judgements, {pid: i for i, pid in enumerate(passage_ids or ())})

    def by_indices(
        stages: list[StageRecord | None], group_by: dict[str, dict[str, str]] | None
    ) -> dict[str, Any]:
        rankings = {
            q: s.indices
            for q, s in zip(qids, stages, strict=True)
            if s is not None and s.indices is not None
        }
        return score_stage_coded(rankings, judgements, labels, cutoffs, group_by)

    return by_indices
