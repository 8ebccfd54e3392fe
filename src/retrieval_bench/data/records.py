"""The in-memory records every later stage reads; loaders produce them, nothing mutates them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

LABEL_STATUSES = ("reviewed", "unreviewed", "no_answer")

# Why a query of a BEIR query file is not in the evaluation: its id is in no qrels file of the
# folder, or only in another split's.
NO_QRELS = "no_qrels"
OTHER_SPLIT = "other_split"


@dataclass(frozen=True)
class Passage:
    id: str
    text: str
    title: str = ""
    doc_id: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Entity:
    name: str
    aliases: tuple[str, ...] = ()
    type: str = ""
    city: str | None = None


@dataclass(frozen=True)
class EvalQuery:
    query_id: str
    query: str
    query_type: str
    label_status: str
    # Graded relevance: passage id -> grade (> 0 relevant, 0 judged non-relevant).
    relevance: dict[str, int] = field(default_factory=dict)
    expected_entities: tuple[str, ...] = ()
    negative_entities: tuple[str, ...] = ()
    expected_cities: tuple[str, ...] = ()
    user_role: str | None = None
    # Evidence chain: one list of acceptable passage ids per hop.
    hops: tuple[tuple[str, ...], ...] = ()
    reference_answer: str | None = None
    notes: str | None = None

    @property
    def relevant_ids(self) -> tuple[str, ...]:
        return tuple(pid for pid, grade in self.relevance.items() if grade > 0)


@dataclass(frozen=True)
class UnjudgedQuery:
    """A query the dataset holds but the chosen labels do not judge: never run, and counted
    among the excluded queries with its `reason` (NO_QRELS, OTHER_SPLIT), so the counts add up
    to the query file."""

    query_id: str
    query_type: str
    reason: str


@dataclass(frozen=True)
class Dataset:
    name: str
    passages: tuple[Passage, ...]
    queries: tuple[EvalQuery, ...]
    entities: tuple[Entity, ...] = ()
    unjudged: tuple[UnjudgedQuery, ...] = ()
    # Content hashes of each source file, recorded in the manifest.
    hashes: dict[str, str] = field(default_factory=dict)
