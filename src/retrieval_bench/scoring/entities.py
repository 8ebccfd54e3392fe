"""Entity-level metrics: do the top K passages mention what the query is about, and nothing it
excluded?

Scoring reads the recorded ranked ids, `{passage id: meta.entities}` (canonical lexicon names;
aliases are resolved in the corpus), `{passage id: meta.acl}` and the query's
`expected_entities` / `negative_entities` / `user_role`. E(top K) is the set of distinct
entities the top K passages mention: sets, not mention counts (a passage naming an entity twice
does not find it twice). An id absent from the lookup mentions nothing.

Family `entities`, for queries with `expected_entities`:

- findable expected entities: the expected ones that at least one passage the asker may read
  (`permissions.may_read`) mentions. An expected entity that no readable passage names cannot
  be shown by any permission-respecting system: like a gold id missing from the corpus it is
  left out of the denominator and counted (`n_expected_unfindable`). A query left with none is
  excluded as "no_findable_expected_entities" (the policy set's `permission` queries: they
  belong to refusal and leak).
- `entity_recall@K` = |findable expected ∩ E(top K)| / |findable expected|;
  `entity_recall_pooled@K` = sum of found / sum of findable expected (= entity_recall@K
  weighted by the number of findable expected entities).
- `unexpected_entity_rate@K` = |E(top K) - expected| / |E(top K)| (all expected, findable or
  not): the share of what was shown that is off-topic; 0 when the top K names no entity
  (nothing unexpected was shown); `unexpected_entity_rate_pooled@K` = sum of unexpected / sum
  of |E(top K)| (undefined when no entity was shown at all).

Family `negative_entities`, for queries with `negative_entities` (what the query excludes):

- `negative_entity_rate@K` = |negative ∩ E(top K)| / |negative|: the share of the excluded
  entities that still appear; `negative_entity_rate_pooled@K` = sum / sum.
- `negative_any@K`: 1 if any excluded entity appears in the top K.

Label states as for the doc metrics: unreviewed queries are excluded ("unreviewed"), no_answer
queries belong to refusal only ("no_answer"); a query the run has no ranking for is
"not_in_run". Everything is sparse-matrix algebra over (query x entity) incidence: the top K's
(query x passage) indicator times the (passage x entity) incidence gives E(top K) per query.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from itertools import islice
from typing import Any

import numpy as np
from scipy import sparse

from retrieval_bench.records import EvalQuery
from retrieval_bench.scoring.aggregate import check_cutoffs, names_at, summarise
from retrieval_bench.scoring.labels import NOT_IN_RUN, label_state
from retrieval_bench.scoring.permissions import Acl, may_read
from retrieval_bench.scoring.registry import pooled_columns, reported

NO_EXPECTED_ENTITIES = "no_expected_entities"
NO_FINDABLE_EXPECTED = "no_findable_expected_entities"
NO_NEGATIVE_ENTITIES = "no_negative_entities"


class EntityIndex:
    """Passage -> entity incidence as a sparse matrix, plus the vocabulary of entity names."""

    def __init__(
        self, passage_entities: Mapping[str, Collection[str]], extra: Collection[str] = ()
    ) -> None:
        names = {e for ents in passage_entities.values() for e in ents} | set(extra)
        self.vocab = {name: i for i, name in enumerate(sorted(names))}
        self.passages = {pid: i for i, pid in enumerate(passage_entities)}
        # One extra, empty row for ids the lookup does not know.
        self.unknown = len(self.passages)
        self.incidence = self.sets([*passage_entities.values(), ()], n_rows=len(self.passages) + 1)
        # Per job, not per stage: {role: which passages it may read}, for one ACL lookup
        # (held to check that the next call passes the same one).
        self._readable: tuple[Mapping[str, Acl], dict[str | None, np.ndarray]] | None = None

    def sets(self, sets: Sequence[Collection[str]], n_rows: int | None = None) -> sparse.csr_array:
        """(len(sets) x n_entities) 0/1 matrix; names outside the vocabulary are ignored."""
        rows = [i for i, s in enumerate(sets) for e in set(s) if e in self.vocab]
        cols = [self.vocab[e] for s in sets for e in set(s) if e in self.vocab]
        shape = (len(sets) if n_rows is None else n_rows, len(self.vocab))
        data = np.ones(len(rows), dtype=np.int64)
        return sparse.csr_array((data, (rows, cols)), shape=shape)

    def shown(self, rankings: Sequence[Sequence[str]], cutoffs: Sequence[int]) -> dict[int, Any]:
        """E(top K) for every K: {K: (n_queries x n_entities) 0/1 matrix}."""
        rows: list[int] = []
        cols: list[int] = []
        ranks: list[int] = []
        top = max(cutoffs)
        for i, ranking in enumerate(rankings):
            for rank, pid in enumerate(islice(ranking, top)):
                rows.append(i)
                cols.append(self.passages.get(pid, self.unknown))
                ranks.append(rank)
        rows_a, cols_a, ranks_a = (np.asarray(x, dtype=np.int64) for x in (rows, cols, ranks))
        out = {}
        for k in cutoffs:
            keep = ranks_a < k
            indicator = sparse.csr_array(
                (np.ones(int(keep.sum()), dtype=np.int64), (rows_a[keep], cols_a[keep])),
                shape=(len(rankings), self.incidence.shape[0]),
            )
            out[k] = _binary(indicator @ self.incidence)
        return out

    def readable_by(self, roles: Sequence[str | None], acl: Mapping[str, Acl]) -> sparse.csr_array:
        """(n_queries x n_entities): the entities some passage the query's role may read names.

        Each role's passage mask is computed once per `acl` object (a job scores every stage
        against the same lookup): the Python loop over passages runs once per role per job."""
        if self._readable is None or self._readable[0] is not acl:
            self._readable = (acl, {})
        per_role = self._readable[1]
        if not roles:
            return self.sets([])
        code = {r: i for i, r in enumerate(dict.fromkeys(roles))}
        for role in code:
            if role not in per_role:
                mask = [may_read(role, acl.get(pid)) for pid in self.passages] + [False]
                per_role[role] = np.array(mask, dtype=np.int64)
        masks = sparse.csr_array(np.vstack([per_role[r] for r in code]))
        table = _binary(masks @ self.incidence)
        return sparse.csr_array(table[np.array([code[r] for r in roles], dtype=int)])


def _binary(matrix: Any) -> sparse.csr_array:
    out = sparse.csr_array(matrix)
    out.data = (out.data > 0).astype(np.int64)
    out.eliminate_zeros()
    return out


def _row_sums(matrix: Any) -> np.ndarray:
    return np.asarray(matrix.sum(axis=1)).ravel().astype(np.int64)


def overlap(a: Any, b: Any) -> np.ndarray:
    """|a_i ∩ b_i| per row of two 0/1 matrices."""
    return _row_sums(a.multiply(b))


def entity_recall(shown: Any, expected: Any) -> np.ndarray:
    """Share of the (findable) expected entities in E(top K); NaN without expected entities."""
    return _ratio(overlap(shown, expected), _row_sums(expected), empty=np.nan)


def unexpected_entity_rate(shown: Any, expected: Any) -> np.ndarray:
    """Share of E(top K) not expected; 0 when the top K names no entity."""
    n_shown = _row_sums(shown)
    return _ratio(n_shown - overlap(shown, expected), n_shown, empty=0.0)


def negative_entity_rate(shown: Any, negative: Any) -> np.ndarray:
    """Share of the excluded entities that still appear in E(top K)."""
    return _ratio(overlap(shown, negative), _row_sums(negative), empty=np.nan)


def _ratio(top: np.ndarray, bottom: np.ndarray, empty: float) -> np.ndarray:
    out = np.full(top.shape, empty, dtype=np.float64)
    np.divide(top, bottom, out=out, where=bottom > 0)
    return out


def entity_names(cutoffs: Sequence[int]) -> list[str]:
    return names_at(reported("entities"), cutoffs)


def negative_names(cutoffs: Sequence[int]) -> list[str]:
    return names_at(reported("negative_entities"), cutoffs)


def _eligible(
    queries: Mapping[str, EvalQuery],
    rankings: Mapping[str, Sequence[str]],
    field: Callable[[EvalQuery], Sequence[str]],
    missing_reason: str,
) -> tuple[list[str], dict[str, str]]:
    """Queries a family can score, and every other one with its reason (label state first)."""
    eligible: list[str] = []
    excluded: dict[str, str] = {}
    for qid, query in queries.items():
        reason = label_state(query) or (None if field(query) else missing_reason)
        if reason is None and qid not in rankings:
            reason = NOT_IN_RUN
        if reason:
            excluded[qid] = reason
        else:
            eligible.append(qid)
    return eligible, excluded


def score_entities(
    rankings: Mapping[str, Sequence[str]],
    queries: Mapping[str, EvalQuery],
    index: EntityIndex,
    acl: Mapping[str, Acl],
    cutoffs: Sequence[int],
    query_types: Mapping[str, str],
    group_by: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, Any]:
    """Family `entities` (definitions in the module docstring)."""
    ks = check_cutoffs(cutoffs)
    candidates, excluded = _eligible(
        queries, rankings, lambda q: q.expected_entities, NO_EXPECTED_ENTITIES
    )
    expected_all = index.sets([queries[q].expected_entities for q in candidates])
    readable = index.readable_by([queries[q].user_role for q in candidates], acl)
    findable = _binary(expected_all.multiply(readable))
    n_findable = _row_sums(findable)
    keep = n_findable > 0
    for qid in np.asarray(candidates, dtype=object)[~keep].tolist():
        excluded[qid] = NO_FINDABLE_EXPECTED
    scored = [q for q, k in zip(candidates, keep.tolist(), strict=True) if k]
    rows = np.flatnonzero(keep)
    expected_all, findable = expected_all[rows], findable[rows]
    shown = index.shown([rankings[q] for q in scored], ks)
    columns: dict[str, np.ndarray] = {
        "n_expected": n_findable[rows],
        "n_expected_unfindable": _row_sums(expected_all) - n_findable[rows],
    }
    for k in ks:
        columns[f"entities_found@{k}"] = overlap(shown[k], findable)
        columns[f"entities_shown@{k}"] = _row_sums(shown[k])
        columns[f"unexpected@{k}"] = columns[f"entities_shown@{k}"] - overlap(
            shown[k], expected_all
        )
        columns[f"entity_recall@{k}"] = entity_recall(shown[k], findable)
        columns[f"unexpected_entity_rate@{k}"] = unexpected_entity_rate(shown[k], expected_all)
    pooled = pooled_columns("entities", ks)
    return summarise(columns, scored, query_types, excluded, entity_names(ks), pooled, group_by)


def score_negative_entities(
    rankings: Mapping[str, Sequence[str]],
    queries: Mapping[str, EvalQuery],
    index: EntityIndex,
    cutoffs: Sequence[int],
    query_types: Mapping[str, str],
    group_by: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, Any]:
    """Family `negative_entities` (definitions in the module docstring)."""
    ks = check_cutoffs(cutoffs)
    scored, excluded = _eligible(
        queries, rankings, lambda q: q.negative_entities, NO_NEGATIVE_ENTITIES
    )
    negative = index.sets([queries[q].negative_entities for q in scored])
    shown = index.shown([rankings[q] for q in scored], ks)
    columns: dict[str, np.ndarray] = {"n_negative": _row_sums(negative)}
    for k in ks:
        appear = overlap(shown[k], negative)
        columns[f"negatives_shown@{k}"] = appear
        columns[f"negative_entity_rate@{k}"] = negative_entity_rate(shown[k], negative)
        columns[f"negative_any@{k}"] = (appear > 0).astype(np.float64)
    pooled = pooled_columns("negative_entities", ks)
    return summarise(columns, scored, query_types, excluded, negative_names(ks), pooled, group_by)
