"""The records every layer reads, at the bottom so that none of them imports what made them.

Loaders produce the dataset records (`Passage`, `Entity`, `EvalQuery`, `Dataset`); an arm or a
stage returns a `Ranked` per query; the pipeline records each query as a `QueryRecord` holding
one `StageRecord` per stage, with the parse (`ParsedQuery`) and filter (`FilterDecision`) behind
it. Scoring, reports, the job folder and comparisons read these, and nothing mutates them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

LABEL_STATUSES = ("reviewed", "unreviewed", "no_answer")
# The `meta` keys of a perturbed query (a variant of an original, `retrieval_bench.perturb`):
# the original's id, and what was changed (`kind`, the library and its settings, the changes).
PERTURBED_FROM = "perturbed_from"
PERTURBATION = "perturbation"

# Why a query of a BEIR query file is not in the evaluation: its id is in no qrels file of the
# folder, or only in another split's.
NO_QRELS = "no_qrels"
OTHER_SPLIT = "other_split"


@dataclass(frozen=True, slots=True)
class Passage:
    """One passage of the corpus. A corpus holds millions of them, so they are slotted (no
    `__dict__`), and the passages a loader read without `meta` share `NO_META` instead of an
    empty dict each: 48 + 64 bytes less a passage, 1.1 GB at 10M passages."""

    id: str
    text: str
    title: str = ""
    doc_id: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)


class _NoMeta(dict[str, Any]):
    """An empty dict that refuses to be filled (it is shared), and unpickles as `NO_META`."""

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("NO_META is shared by every passage without meta: it cannot be changed")

    __setitem__ = __delitem__ = __ior__ = _refuse
    update = setdefault = pop = popitem = clear = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return (_no_meta, ())


def _no_meta() -> dict[str, Any]:
    return NO_META


NO_META: dict[str, Any] = _NoMeta()
"""The `meta` of every passage a loader read without one: one shared, read-only empty dict."""


@dataclass(frozen=True)
class Entity:
    name: str
    aliases: tuple[str, ...] = ()
    type: str = ""
    city: str | None = None


@dataclass(frozen=True)
class JudgeGrade:
    """A model judge's grade of one (query, passage) pair, on the evaluation set's grade
    scale. `is_label`: it is the pair's label (no person labelled the pair); otherwise a
    person's label stands and the judge's grade is kept beside it, to measure the judge
    against people. `source` names the judge (`<kind>:<model>[:<prompt sha256, 12 digits>]`)."""

    grade: int
    is_label: bool
    source: str


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
    # Grades a model judge gave (passage id -> JudgeGrade); those with `is_label` are also in
    # `relevance`, as the pair's label.
    judge: dict[str, JudgeGrade] = field(default_factory=dict)
    # The record's free-form `meta` (native evaluation sets). Scoring reads none of it; a
    # perturbed query (`retrieval_bench.perturb`) carries its link to the original here.
    meta: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def perturbed_from(self) -> str | None:
        """The id of the query this one is a variant of (`meta.perturbed_from`), or None."""
        value = self.meta.get(PERTURBED_FROM)
        return value if isinstance(value, str) else None

    @property
    def relevant_ids(self) -> tuple[str, ...]:
        return tuple(pid for pid, grade in self.relevance.items() if grade > 0)

    @property
    def people_relevance(self) -> dict[str, int]:
        """The labels people gave: `relevance` without the judge's labels."""
        labelled = {pid for pid, g in self.judge.items() if g.is_label}
        return {pid: g for pid, g in self.relevance.items() if pid not in labelled}


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
    # With perturbed variants among `queries` (`retrieval_bench.perturb`): what each kind made
    # and left out (`perturb.evalset.KindReport.to_json()`), for metrics.json.
    perturbations: tuple[dict[str, Any], ...] = ()

    @property
    def originals(self) -> tuple[EvalQuery, ...]:
        """The queries that are not variants of another: what every standard metric scores."""
        return tuple(q for q in self.queries if q.perturbed_from is None)


def passage_text(passage: Passage) -> str:
    """What every text-reading component sees of a passage: its title, then its text."""
    return f"{passage.title}\n{passage.text}" if passage.title else passage.text


# Why a ranking is empty (`Ranked.empty_reason`), counted per stage in metrics.json: the query
# has no term once tokenised (only punctuation), none of its terms is in the corpus, the filter
# left no candidate, or the arm returned nothing for a reason it did not give.
NO_QUERY_TERMS = "no_query_terms"
NO_MATCHING_TERMS = "no_matching_terms"
FILTERED_OUT = "filtered_out"
NO_CANDIDATES = "no_candidates"


@dataclass(frozen=True)
class Ranked:
    """An arm's candidate pool for one query: passage indices (into the corpus) and scores;
    an empty pool says why in `empty_reason`."""

    indices: np.ndarray  # int64, best first
    scores: np.ndarray  # float64, same length
    requested: int
    empty_reason: str | None = None

    @property
    def returned(self) -> int:
        return len(self.indices)


@dataclass(frozen=True)
class ParsedQuery:
    cities: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    excluded_entities: tuple[str, ...] = ()
    negation_cues: tuple[str, ...] = ()
    # Cities a cue excluded: dropped from `cities` so the city filter never narrows to them.
    excluded_cities: tuple[str, ...] = ()
    # (surface as written, canonical entity) for every entity mention, in text order.
    mentions: tuple[tuple[str, str], ...] = ()
    length: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "cities": list(self.cities),
            "entities": list(self.entities),
            "excluded_entities": list(self.excluded_entities),
            "negation_cues": list(self.negation_cues),
            "excluded_cities": list(self.excluded_cities),
            "mentions": [list(m) for m in self.mentions],
            "length": self.length,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ParsedQuery:
        """Back from `to_json` (rankings.jsonl), for re-scoring stored rankings."""
        return cls(
            cities=tuple(data["cities"]),
            entities=tuple(data["entities"]),
            excluded_entities=tuple(data["excluded_entities"]),
            negation_cues=tuple(data["negation_cues"]),
            excluded_cities=tuple(data["excluded_cities"]),
            mentions=tuple((surface, entity) for surface, entity in data["mentions"]),
            length=int(data["length"]),
        )


@dataclass(frozen=True)
class FilterDecision:
    mask: np.ndarray | None  # None: every passage allowed
    applied: tuple[str, ...] = field(default_factory=tuple)

    @property
    def allowed(self) -> int | None:
        return None if self.mask is None else int(self.mask.sum())


@dataclass(frozen=True)
class StageRecord:
    """One stage's ranking of one query, as recorded and written under the stage's name."""

    ids: list[str]
    """The ranked passage (or document) ids, best first."""
    scores: list[float]
    """Each id's score at this stage, in the same order."""
    pool_requested: int
    """How many ids the stage was asked for."""
    pool_returned: int
    """How many it returned (fewer when the filter or the corpus left fewer)."""
    indices: np.ndarray | None = field(default=None, repr=False, compare=False)
    """The same ranking as passage indices (`ids[i] == passage_ids[indices[i]]`), which the job
    scores through the integer core; None for a record built without a corpus at hand. Unique
    by construction (TieBreak.top, RRF and "fill" emit each index once); the scorer still
    checks, as the check is one vectorised sort. Not written to rankings.jsonl."""
    empty_reason: str | None = None
    """Why the ranking is empty (retrievers.base: no_query_terms, ...); None when it is not."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ids": self.ids,
            "scores": self.scores,
            "pool_requested": self.pool_requested,
            "pool_returned": self.pool_returned,
        }
        if self.empty_reason is not None:
            out["empty_reason"] = self.empty_reason
        return out

    @classmethod
    def from_json(
        cls, data: dict[str, Any], positions: Mapping[str, int] | None = None
    ) -> StageRecord:
        """Back from `to_json`; with the corpus order `positions` (passage id -> index) also
        the passage indices, so stored rankings score through the job's own path (without it,
        `indices` is None). A malformed record raises ValueError (TypeError, KeyError for a
        missing field) saying what is wrong."""
        ids, scores = data["ids"], data["scores"]
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise ValueError("'ids' must be a list of passage ids")
        if not isinstance(scores, list) or not all(_is_number(s) for s in scores):
            raise ValueError("'scores' must be a list of numbers")
        if len(scores) != len(ids):
            raise ValueError(f"{len(ids)} ids but {len(scores)} scores")
        reason = data.get("empty_reason")
        if reason is not None and not isinstance(reason, str):
            raise ValueError("'empty_reason' must be a string")
        indices = None
        if positions is not None:
            unknown = next((pid for pid in ids if pid not in positions), None)
            if unknown is not None:
                raise ValueError(f"passage {unknown!r} is not in the corpus")
            indices = np.fromiter((positions[pid] for pid in ids), dtype=np.int64, count=len(ids))
        return cls(
            ids=list(ids),
            scores=[float(s) for s in scores],
            pool_requested=_count(data, "pool_requested"),
            pool_returned=_count(data, "pool_returned"),
            indices=indices,
            empty_reason=reason,
        )


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _count(data: dict[str, Any], key: str) -> int:
    value = data[key]
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{key!r} must be a non-negative integer")
    return value


@dataclass(frozen=True)
class QueryRecord:
    """One query's line of rankings.jsonl: the query, how it was routed and filtered, and every
    stage's ranking."""

    query: EvalQuery
    """The query as the evaluation set gives it (written as query_id, query, query_type,
    label_status)."""
    route: str | None
    """The router's route for the query; None without a router."""
    strategy: str
    """The strategy that answered it: the arms searched and how they were combined."""
    parsed: ParsedQuery
    """What the query parser found in the query: entities, cities, negation cues, exclusions."""
    filter: FilterDecision
    """The filters applied to the query (city, permissions, exclusions) before any arm ranked."""
    stages: dict[str, StageRecord] = field(default_factory=dict)
    """Every recorded stage's ranking by its name: each arm, fused, then the pipeline's stages."""
    rule: str | None = None
    """The router rule that chose the route, recorded so every routing decision can be explained;
    None without a router."""
    baselines: dict[str, StageRecord] = field(default_factory=dict)
    """With a router: each single retriever cut to top_k on the same query, filtered as without
    a router (no exclusions), so routed and unrouted are compared on identical queries."""
    features: dict[str, float | None] | None = None
    """With a learned router: the features it chose the route from (routing.features); None for
    a feature that could not be computed. Absent (None) without one."""

    def to_json(self) -> dict[str, Any]:
        out = {
            "query_id": self.query.query_id,
            "query": self.query.query,
            "query_type": self.query.query_type,
            "label_status": self.query.label_status,
            "route": self.route,
            "rule": self.rule,
            "strategy": self.strategy,
            "parsed": self.parsed.to_json(),
            "filter": {"applied": list(self.filter.applied), "allowed": self.filter.allowed},
            "stages": {name: stage.to_json() for name, stage in self.stages.items()},
            "baselines": {name: stage.to_json() for name, stage in self.baselines.items()},
        }
        if self.features is not None:
            out["features"] = dict(self.features)
        if self.query.perturbed_from is not None:  # a variant: the explorer shows its original
            out[PERTURBED_FROM] = self.query.perturbed_from
            out[PERTURBATION] = self.query.meta.get(PERTURBATION)
        return out

    @classmethod
    def from_json(
        cls,
        data: dict[str, Any],
        query: EvalQuery | None = None,
        positions: Mapping[str, int] | None = None,
    ) -> QueryRecord:
        """Back from `to_json` (one line of rankings.jsonl): the one parser of that line.

        `query` is the query as the labels now describe it (re-scoring); without it, the query
        the line recorded (its id, text, type and label status; no labels). `positions` as for
        `StageRecord.from_json`. A perturbed variant's line keeps its link to the original
        (`meta`). The filter's mask is not stored (scoring reads only what it
        applied). A malformed line raises ValueError, TypeError or KeyError (a missing field),
        naming the stage at fault."""
        if not isinstance(data.get("query_id"), str):
            raise ValueError("'query_id' must be a string")
        if query is None:
            query = EvalQuery(
                query_id=data["query_id"],
                query=str(data["query"]),
                query_type=str(data["query_type"]),
                label_status=str(data["label_status"]),
                meta=_variant_meta(data),
            )
        return cls(
            query=query,
            route=data["route"],
            strategy=data["strategy"],
            parsed=ParsedQuery.from_json(data["parsed"]),
            filter=FilterDecision(None, tuple(data["filter"]["applied"])),
            stages=_stages(data, "stages", positions),
            rule=data["rule"],
            baselines=_stages(data, "baselines", positions),
            features=_features(data),
        )


def _features(data: dict[str, Any]) -> dict[str, float | None] | None:
    """A learned router's features as its line recorded them (`to_json`), or None."""
    features = data.get("features")
    if features is None:
        return None
    if not isinstance(features, dict):
        raise ValueError("'features' must be an object of feature values")
    for name, value in features.items():
        if value is not None and not _is_number(value):
            raise ValueError(f"features.{name}: must be a number or null, got {value!r}")
    return {str(name): None if v is None else float(v) for name, v in features.items()}


def _variant_meta(data: dict[str, Any]) -> dict[str, Any]:
    """A perturbed variant's link to its original, as its line recorded it (`to_json`)."""
    source = data.get(PERTURBED_FROM)
    if source is None:
        return {}
    if not isinstance(source, str):
        raise ValueError(f"{PERTURBED_FROM!r} must be a query id")
    return {PERTURBED_FROM: source, PERTURBATION: data.get(PERTURBATION)}


def _stages(
    data: dict[str, Any], group: str, positions: Mapping[str, int] | None
) -> dict[str, StageRecord]:
    recorded = data[group]
    if not isinstance(recorded, dict):
        raise ValueError(f"{group!r} must be an object of stages")
    out = {}
    for name, stage in recorded.items():
        try:
            if not isinstance(stage, dict):
                raise ValueError("not an object")
            out[name] = StageRecord.from_json(stage, positions)
        except KeyError as exc:
            raise ValueError(f"{group}.{name}: missing {exc}") from None
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{group}.{name}: {exc}") from None
    return out


def empty_rankings(stages: Sequence[StageRecord | None]) -> dict[str, int]:
    """How many of one stage's rankings are empty, by `empty_reason`: such a query is still
    scored (0: the system was asked and returned nothing), and this says why it returned
    nothing."""
    counts: dict[str, int] = {}
    for stage in stages:
        if stage is not None and not stage.ids:
            reason = stage.empty_reason or NO_CANDIDATES
            counts[reason] = counts.get(reason, 0) + 1
    return dict(sorted(counts.items()))
