"""Decide which queries can be scored, and record why the others cannot.

A query without usable labels is never scored as 0: it would pull every retriever's average down
by the same amount and hide real differences. Instead it is excluded with a named reason, and the
counts travel with the metrics so a reader sees how much of the evaluation set was measured.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from retrieval_bench.records import LABEL_STATUSES, EvalQuery, UnjudgedQuery

log = logging.getLogger(__name__)

UNKNOWN_TYPE = "unknown"

# Exclusion reasons, in the order they are checked (the first that applies wins).
UNREVIEWED = "unreviewed"
NO_ANSWER = "no_answer"
NO_RELEVANT_IDS = "no_relevant_ids"
GOLD_MISSING = "gold_missing_from_corpus"
# Added by aggregation: a scorable query that the run holds no ranking for.
NOT_IN_RUN = "not_in_run"


@dataclass
class Judgements:
    """The labels one scoring pass uses, plus an account of every query left out.

    `qrels` holds graded labels (grade > 0 relevant, <= 0 judged non-relevant) for scorable
    queries only; `query_types` covers every query so per-type exclusion counts are complete.
    """

    qrels: dict[str, dict[str, int]] = field(default_factory=dict)
    query_types: dict[str, str] = field(default_factory=dict)
    excluded: dict[str, str] = field(default_factory=dict)
    no_answer: list[str] = field(default_factory=list)
    missing_gold: dict[str, list[str]] = field(default_factory=dict)


def label_state(query: EvalQuery) -> str | None:
    """The exclusion reason a query's label status alone implies ("unreviewed", "no_answer"),
    or None when its labels can be used; `judge` and the entity families apply it first."""
    if query.label_status == "unreviewed":
        return UNREVIEWED
    if query.label_status == "no_answer":
        return NO_ANSWER
    return None


def judge(
    queries: Sequence[EvalQuery],
    corpus_ids: Collection[str] | None = None,
    unjudged: Sequence[UnjudgedQuery] = (),
) -> Judgements:
    """Split evaluation queries into scorable ones and excluded ones with reasons; `unjudged`
    (a dataset's queries its labels do not cover, e.g. BEIR queries without qrels) are
    excluded with their own reasons.

    `corpus_ids=None` skips the corpus check (e.g. scoring a TREC run without the corpus at hand);
    otherwise a query whose relevant id is absent from the corpus is excluded, because no
    retriever could ever find it and scoring it would measure the labels, not the retriever.
    """
    if corpus_ids is not None and not isinstance(corpus_ids, AbstractSet):
        corpus_ids = set(corpus_ids)
    out = Judgements()
    for q in queries:
        qid = q.query_id
        if qid in out.query_types:
            raise ValueError(f"query id {qid!r} appears twice in the evaluation set")
        out.query_types[qid] = q.query_type or UNKNOWN_TYPE
        if q.label_status not in LABEL_STATUSES:
            raise ValueError(f"query {qid!r}: unknown label_status {q.label_status!r}")
        state = label_state(q)
        if state is not None:
            out.excluded[qid] = state
            if state == NO_ANSWER:
                out.no_answer.append(qid)
            continue
        relevant = q.relevant_ids
        if not relevant:
            out.excluded[qid] = NO_RELEVANT_IDS
            continue
        if corpus_ids is not None:
            missing = [pid for pid in relevant if pid not in corpus_ids]
            if missing:
                log.warning(
                    "query %s excluded: relevant id(s) not in the corpus: %s",
                    qid,
                    ", ".join(missing),
                )
                out.excluded[qid] = GOLD_MISSING
                out.missing_gold[qid] = missing
                continue
        out.qrels[qid] = dict(q.relevance)
    for u in unjudged:
        if u.query_id in out.query_types:
            raise ValueError(f"query id {u.query_id!r} is both judged and unjudged")
        out.query_types[u.query_id] = u.query_type or UNKNOWN_TYPE
        out.excluded[u.query_id] = u.reason
    return out


def judge_qrels(
    qrels: Mapping[str, Mapping[str, int]], query_types: Mapping[str, str] | None = None
) -> Judgements:
    """Judgements from TREC qrels, which carry no review status and no corpus.

    A query without any grade > 0, or one named in `query_types` but absent from the qrels, is
    excluded as "no_relevant_ids". Queries without a type get "unknown".
    """
    types = dict(query_types or {})
    out = Judgements()
    for qid in list(qrels) + [q for q in types if q not in qrels]:
        out.query_types[qid] = types.get(qid) or UNKNOWN_TYPE
        labels = qrels.get(qid, {})
        if not any(grade > 0 for grade in labels.values()):
            out.excluded[qid] = NO_RELEVANT_IDS
            continue
        out.qrels[qid] = dict(labels)
    return out
