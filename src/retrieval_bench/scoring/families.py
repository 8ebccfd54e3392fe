"""Every metric family of one recorded stage, beyond the doc metrics.

The doc metrics (`scoring.aggregate.score_stage`) stay at the top of each stage's result, as
the metrics.json contract says; the other families sit under `stage["families"][<name>]`, each
in exactly the same layout (overall, by_type, by_<field>, counts with its own scored and
excluded queries and reasons, per_query, excluded_queries), with metric names unique across
families:

| family              | scored queries                                   | module        |
|---------------------|--------------------------------------------------|---------------|
| `readable`          | doc-scorable with >= 1 relevant passage readable | permissions   |
| `leak`              | every query with a user_role                     | permissions   |
| `entities`          | labelled, with findable expected_entities        | entities      |
| `negative_entities` | labelled, with negative_entities                 | entities      |
| `evidence`          | doc-scorable with a readable evidence chain      | evidence      |

Refusal is per job, not per stage (it reads one chosen stage's scores): `scoring.refusal`.
Scoring still reads recorded rankings only: the `ScoringContext` holds the query fields and
passage metadata as plain lookups, built once per job from the dataset.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from retrieval_bench.records import Dataset, EvalQuery
from retrieval_bench.scoring.entities import EntityIndex, score_entities, score_negative_entities
from retrieval_bench.scoring.evidence import score_evidence
from retrieval_bench.scoring.labels import Judgements
from retrieval_bench.scoring.permissions import Acl, score_leak, score_readable, unreadable_queries
from retrieval_bench.scoring.registry import lower_is_better

__all__ = ["FAMILIES", "ScoringContext", "lower_is_better", "merge_headlines", "score_families"]

FAMILIES = ("readable", "leak", "entities", "negative_entities", "evidence")


@dataclass(frozen=True)
class ScoringContext:
    """Query fields and passage metadata the families read, as lookups by id. The passage
    lookups hold only the passages that have the field: a passage absent from `passage_acl` is
    public and one absent from `entity_index` names no entity, as a passage whose `meta` lacks
    `acl` or `entities` does (a corpus of 10M passages, most without either, then costs no
    10M-entry dicts to score)."""

    queries: Mapping[str, EvalQuery]
    passage_acl: Mapping[str, Acl]
    entity_index: EntityIndex
    corpus_ids: frozenset[str] | None = None

    @classmethod
    def from_dataset(cls, dataset: Dataset) -> ScoringContext:
        queries = {q.query_id: q for q in dataset.queries}
        acl: dict[str, Acl] = {
            p.id: frozenset(p.meta["acl"])
            for p in dataset.passages
            if p.meta.get("acl") is not None
        }
        labelled = {
            e for q in dataset.queries for e in (*q.expected_entities, *q.negative_entities)
        }
        index = EntityIndex(
            {p.id: tuple(p.meta["entities"]) for p in dataset.passages if p.meta.get("entities")},
            labelled,
        )
        return cls(queries, acl, index, frozenset(p.id for p in dataset.passages))

    @cached_property
    def roles(self) -> dict[str, str | None]:
        """{query id: user_role}, built once per job (every stage's families read it)."""
        return {qid: q.user_role for qid, q in self.queries.items()}

    def unreadable(self, judgements: Judgements) -> list[str]:
        """Scorable queries whose relevant passages their asker may not read."""
        return unreadable_queries(judgements, self.roles, self.passage_acl)


def score_families(
    rankings: Mapping[str, Sequence[str]],
    judgements: Judgements,
    context: ScoringContext,
    cutoffs: Sequence[int],
    group_by: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, Any]:
    """{family: result} for one stage's rankings (see the table above)."""
    roles = context.roles
    types = judgements.query_types
    acl = context.passage_acl
    return {
        "readable": score_readable(rankings, judgements, roles, acl, cutoffs, group_by),
        "leak": score_leak(rankings, types, roles, acl, cutoffs, group_by, context.queries),
        "entities": score_entities(
            rankings, context.queries, context.entity_index, acl, cutoffs, types, group_by
        ),
        "negative_entities": score_negative_entities(
            rankings, context.queries, context.entity_index, cutoffs, types, group_by
        ),
        "evidence": score_evidence(
            rankings, judgements, context.queries, acl, cutoffs, context.corpus_ids, group_by
        ),
    }


def merge_headlines(stage: dict[str, Any]) -> None:
    """Copy each family's aggregates into the stage's `overall` and `by_type`.

    The job-folder contract (ARCHITECTURE.md) reads every metric name from a stage's
    `overall` / `by_type`; the families keep their own populations, so each family's query
    count travels beside its values as `n_<family>` (a family undefined for a group contributes
    None values).
    """
    for family, result in stage.get("families", {}).items():
        groups = [(stage["overall"], result["overall"])]
        for qtype, group in result.get("by_type", {}).items():
            target = stage["by_type"].setdefault(qtype, {"n": 0})
            groups.append((target, group))
        for target, group in groups:
            for key, value in group.items():
                if key not in ("n", "undefined"):
                    target[key] = value
            target[f"n_{family}"] = group.get("n", 0)
