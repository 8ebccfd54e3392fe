"""Per-query ranking metrics, one small function each, vectorised over a batch of queries.

Definitions follow trec_eval (relevance level 1: a doc is relevant when its grade is > 0), so a
TREC export of the same ranking scores identically there:

- recall@k    hits in the top k / number of relevant ids (never / k)
- precision@k hits in the top k / k, even when the ranking is shorter than k (trec_eval P_k)
- hit@k       1 if any relevant id is in the top k (trec_eval success_k)
- mrr@k       1 / rank of the first relevant id within the top k, else 0
              (trec_eval recip_rank on the run cut to k)
- ndcg@k      trec_eval ndcg_cut_k: gain = grade, discount 1 / log2(rank + 1), ideal ranking
              from all the query's judged grades
- recall_bound@k  min(k, |G|) / |G|: the best recall@k any ranking could reach
- all_hit@k   1 if every relevant id is in the top k
- judged@k    share of the top k carrying any label, over k

Every metric takes a `RankedGrades`, built once per (stage, max cut-off) and cut down with
`truncate` for smaller cut-offs; it stores only where the labelled ids sit (a sparse layout),
so every metric is a bincount over a few entries per query. Metrics that divide by the number
of relevant ids (recall, recall_bound, all_hit, ndcg) return NaN for a query with none;
aggregation never feeds such queries in (they are excluded), so NaN marks a bug rather than
hiding one as 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain

import numpy as np

_NAN = math.nan


@dataclass(frozen=True)
class RankedGrades:
    """Where the labelled ids sit in each ranking, cut to k: a sparse layout.

    A query's top k holds a handful of labelled ids among k ranked ones, so only those are
    stored: `row`, `rank` (0-based) and `grade` of every labelled id found in a ranking's top
    k, ordered by (row, rank); `lengths` the number of ranked ids within k; `n_relevant` the
    number of ids with grade > 0; `ideal_row`, `ideal_pos`, `ideal_grade` the query's grades > 0
    sorted descending (the best possible ranking), cut to k. Every metric is a bincount over
    these arrays, so a batch costs O(labels) numpy work, not O(queries x k).

    `grades`, `judged`, `retrieved` and `ideal` give the dense (n_queries, k) view (grade
    clipped at 0, padding past a short ranking) for inspection and tests.
    """

    k: int
    lengths: np.ndarray
    row: np.ndarray
    rank: np.ndarray
    grade: np.ndarray
    n_relevant: np.ndarray
    ideal_row: np.ndarray
    ideal_pos: np.ndarray
    ideal_grade: np.ndarray

    @property
    def n(self) -> int:
        return len(self.lengths)

    def truncate(self, k: int) -> RankedGrades:
        """The same queries cut to a smaller k, without re-reading the rankings."""
        if not 0 < k <= self.k:
            raise ValueError(f"cannot truncate k={self.k} grades to k={k}")
        keep = self.rank < k
        ideal = self.ideal_pos < k
        return RankedGrades(
            k=k,
            lengths=np.minimum(self.lengths, k),
            row=self.row[keep],
            rank=self.rank[keep],
            grade=self.grade[keep],
            n_relevant=self.n_relevant,
            ideal_row=self.ideal_row[ideal],
            ideal_pos=self.ideal_pos[ideal],
            ideal_grade=self.ideal_grade[ideal],
        )

    @property
    def grades(self) -> np.ndarray:
        out = np.zeros((self.n, self.k))
        out[self.row, self.rank] = np.maximum(self.grade, 0.0)
        return out

    @property
    def judged(self) -> np.ndarray:
        out = np.zeros((self.n, self.k), dtype=bool)
        out[self.row, self.rank] = True
        return out

    @property
    def retrieved(self) -> np.ndarray:
        return np.arange(self.k) < self.lengths[:, None]

    @property
    def ideal(self) -> np.ndarray:
        out = np.zeros((self.n, self.k))
        out[self.ideal_row, self.ideal_pos] = self.ideal_grade
        return out


def build_ranked_grades(
    rankings: Sequence[Sequence[str]],
    qrels: Sequence[Mapping[str, int]],
    k: int,
    query_ids: Sequence[str] | None = None,
) -> RankedGrades:
    """Find every labelled id in its ranking and keep those within the top k.

    `rankings[i]` is scored against `qrels[i]`. A ranking holding an id twice raises ValueError
    (named by `query_ids[i]` when given): duplicates are an upstream bug, and deduplicating
    would score a ranking the system never produced. The whole ranking is checked, not just
    its top k.

    Speed: per query, one C-level `set` of the ranking (the duplicate check, which touches each
    id once), the labelled ids it holds (`labels.keys() & seen`, a handful), and their
    positions (`list.index`, over strings the set just brought into cache). Nothing is done per
    unlabelled ranked id beyond the set, and the layout is sparse (see RankedGrades).
    """
    if k <= 0:
        raise ValueError(f"k must be positive, got {k}")
    n = len(rankings)
    if len(qrels) != n:
        raise ValueError(f"{n} rankings but {len(qrels)} label sets")
    found_per_query: list[int] = []
    positions: list[int] = []
    found_grades: list[int] = []
    for i, (labels, ranking) in enumerate(zip(qrels, rankings, strict=True)):
        seen = set(ranking)
        if len(seen) != len(ranking):
            name = f"query {query_ids[i]!r}" if query_ids is not None else f"ranking #{i}"
            raise ValueError(
                f"{name}: ranking holds id {first_duplicate(ranking)!r} more than once"
            )
        found = labels.keys() & seen
        found_per_query.append(len(found))
        if found:
            positions += map(ranking.index, found)
            found_grades += map(labels.__getitem__, found)
    lengths = np.fromiter(map(len, rankings), dtype=np.int64, count=n)
    np.minimum(lengths, k, out=lengths)
    row = np.repeat(np.arange(n), np.asarray(found_per_query, dtype=np.int64))
    rank = np.asarray(positions, dtype=np.int64)
    grade = np.asarray(found_grades, dtype=np.float64)
    keep = rank < k
    row, rank, grade = row[keep], rank[keep], grade[keep]
    order = np.argsort(row * k + rank, kind="stable")
    row, rank, grade = row[order], rank[order], grade[order]

    # Ideal ranking: every grade > 0 of the query, best first, cut to k.
    label_counts = np.fromiter(map(len, qrels), dtype=np.int64, count=n)
    all_grades = np.fromiter(
        chain.from_iterable(q.values() for q in qrels),
        dtype=np.float64,
        count=int(label_counts.sum()),
    )
    positive = all_grades > 0
    ideal_row = np.repeat(np.arange(n), label_counts)[positive]
    ideal_grade = all_grades[positive]
    n_relevant = np.bincount(ideal_row, minlength=n)
    if len(ideal_grade):
        # Rows are already ascending: a stable sort on (row, -grade) is nearly presorted.
        top = float(ideal_grade.max())
        order = np.argsort(ideal_row * (top + 1.0) + (top - ideal_grade), kind="stable")
        ideal_row, ideal_grade = ideal_row[order], ideal_grade[order]
    starts = np.cumsum(n_relevant) - n_relevant
    ideal_pos = np.arange(len(ideal_row)) - starts[ideal_row]
    cut = ideal_pos < k
    return RankedGrades(
        k=k,
        lengths=lengths,
        row=row,
        rank=rank,
        grade=grade,
        n_relevant=n_relevant,
        ideal_row=ideal_row[cut],
        ideal_pos=ideal_pos[cut],
        ideal_grade=ideal_grade[cut],
    )


def first_duplicate(ranking: Iterable[str]) -> str | None:
    """The first id met a second time, to name it in the error; None when all are distinct."""
    seen: set[str] = set()
    for doc in ranking:
        if doc in seen:
            return doc
        seen.add(doc)
    return None


def hits(rg: RankedGrades) -> np.ndarray:
    """Number of relevant ids in the top k (the numerator of recall and precision)."""
    return np.bincount(rg.row[rg.grade > 0], minlength=rg.n)


def _per_relevant(numerator: np.ndarray, rg: RankedGrades) -> np.ndarray:
    """numerator / n_relevant, NaN where the query has no relevant id."""
    out = np.full(rg.n_relevant.shape, np.nan)
    np.divide(numerator, rg.n_relevant, out=out, where=rg.n_relevant > 0)
    return out


def recall(rg: RankedGrades) -> np.ndarray:
    """Share of the relevant ids found in the top k."""
    return _per_relevant(hits(rg), rg)


def recall_bound(rg: RankedGrades) -> np.ndarray:
    """Best recall@k any ranking could reach: min(k, |G|) / |G|."""
    return _per_relevant(np.minimum(rg.k, rg.n_relevant), rg)


def hit(rg: RankedGrades) -> np.ndarray:
    """1.0 if any relevant id is in the top k."""
    return (hits(rg) > 0).astype(np.float64)


def all_hit(rg: RankedGrades) -> np.ndarray:
    """1.0 if every relevant id is in the top k (NaN without relevant ids)."""
    out = (hits(rg) == rg.n_relevant).astype(np.float64)
    out[rg.n_relevant == 0] = np.nan
    return out


def mrr(rg: RankedGrades) -> np.ndarray:
    """Reciprocal rank of the first relevant id within the top k, 0 if none."""
    relevant = rg.grade > 0
    rows, ranks = rg.row[relevant], rg.rank[relevant]
    # Sorted by (row, rank): a row's first entry is its best-ranked relevant id.
    first = np.ones(len(rows), dtype=bool)
    first[1:] = rows[1:] != rows[:-1]
    out = np.zeros(rg.n)
    out[rows[first]] = 1.0 / (ranks[first] + 1.0)
    return out


def _discounts(k: int) -> np.ndarray:
    return 1.0 / np.log2(np.arange(2, k + 2, dtype=np.float64))


def ndcg(rg: RankedGrades) -> np.ndarray:
    """trec_eval ndcg_cut: DCG of the top k over the DCG of the ideal top k.

    bincount adds each query's terms in rank order, as trec_eval does."""
    discount = _discounts(rg.k)
    gains = np.maximum(rg.grade, 0.0) * discount[rg.rank]
    dcg = np.bincount(rg.row, weights=gains, minlength=rg.n)
    ideal = rg.ideal_grade * discount[rg.ideal_pos]
    idcg = np.bincount(rg.ideal_row, weights=ideal, minlength=rg.n)
    out = np.full(rg.n, np.nan)
    np.divide(dcg, idcg, out=out, where=idcg > 0)
    return out


def precision(rg: RankedGrades) -> np.ndarray:
    """Hits in the top k over k (a short ranking is not rewarded for stopping early)."""
    return hits(rg) / float(rg.k)


def judged(rg: RankedGrades) -> np.ndarray:
    """Share of the top k that carries a label: low values mean the labels, not the
    retriever, limit what the other metrics can say."""
    return np.bincount(rg.row, minlength=rg.n) / float(rg.k)


# Metric name (without "@K") -> function; the order is the order reports list them in.
METRICS = {
    "recall": recall,
    "recall_bound": recall_bound,
    "hit": hit,
    "all_hit": all_hit,
    "mrr": mrr,
    "ndcg": ndcg,
    "precision": precision,
    "judged": judged,
}
