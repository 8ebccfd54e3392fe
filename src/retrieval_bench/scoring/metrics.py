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
`truncate` for smaller cut-offs. Metrics that divide by the number of relevant ids (recall,
recall_bound, all_hit, ndcg) return NaN for a query with none; aggregation never feeds such
queries in (they are excluded), so NaN marks a bug rather than hiding one as 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, islice, repeat

import numpy as np

_NAN = math.nan


@dataclass(frozen=True)
class RankedGrades:
    """Relevance grades laid out by rank, shape (n_queries, k); padding past a short ranking.

    `grades` holds the grade clipped at 0 (0 for unjudged, non-relevant or past the end),
    `judged` whether the doc at that rank carries any label, `retrieved` whether a doc exists at
    that rank, `n_relevant` the number of ids with grade > 0, `ideal` the query's judged grades
    sorted descending (the best possible ranking), cut to k.
    """

    grades: np.ndarray
    judged: np.ndarray
    retrieved: np.ndarray
    n_relevant: np.ndarray
    ideal: np.ndarray

    @property
    def k(self) -> int:
        return int(self.grades.shape[1])

    def truncate(self, k: int) -> RankedGrades:
        """The same queries cut to a smaller k, without rebuilding (views, no copies)."""
        if not 0 < k <= self.k:
            raise ValueError(f"cannot truncate k={self.k} grades to k={k}")
        return RankedGrades(
            grades=self.grades[:, :k],
            judged=self.judged[:, :k],
            retrieved=self.retrieved[:, :k],
            n_relevant=self.n_relevant,
            ideal=self.ideal[:, :k],
        )


def build_ranked_grades(
    rankings: Sequence[Sequence[str]],
    qrels: Sequence[Mapping[str, int]],
    k: int,
    query_ids: Sequence[str] | None = None,
) -> RankedGrades:
    """Look up every ranked id's grade and lay the grades out as (n_queries, k) matrices.

    `rankings[i]` is scored against `qrels[i]`. A ranking holding an id twice raises ValueError
    (named by `query_ids[i]` when given): duplicates are an upstream bug, and deduplicating
    would score a ranking the system never produced. The whole ranking is checked, not just
    its top k.

    Speed: the per-query Python is one generator step; the id -> grade lookup is a C-level
    `map` of the query's label dict over its top k, right after the duplicate check touched the
    same strings (still in cache); the layout into matrices is one boolean-mask assignment.
    """
    if k <= 0:
        raise ValueError(f"k must be positive, got {k}")
    n = len(rankings)
    if len(qrels) != n:
        raise ValueError(f"{n} rankings but {len(qrels)} label sets")
    lengths = np.fromiter(map(len, rankings), dtype=np.int64, count=n)
    np.minimum(lengths, k, out=lengths)

    def lookups() -> Iterator[Iterator[float]]:
        for i, (labels, ranking) in enumerate(zip(qrels, rankings, strict=True)):
            if len(set(ranking)) != len(ranking):
                name = f"query {query_ids[i]!r}" if query_ids is not None else f"ranking #{i}"
                doc = first_duplicate(ranking)
                raise ValueError(f"{name}: ranking holds id {doc!r} more than once")
            # NaN marks an id without a label.
            yield map(labels.get, islice(ranking, k), repeat(_NAN))

    looked_up = np.fromiter(
        chain.from_iterable(lookups()), dtype=np.float64, count=int(lengths.sum())
    )
    retrieved = np.arange(k) < lengths[:, None]
    grades = np.zeros((n, k))
    grades[retrieved] = np.fmax(looked_up, 0.0)  # fmax: NaN (unjudged) -> 0, negative -> 0
    judged = np.zeros((n, k), dtype=bool)
    judged[retrieved] = ~np.isnan(looked_up)

    # Ideal ranking: every judged grade of the query, best first, cut to k.
    label_counts = np.fromiter(map(len, qrels), dtype=np.int64, count=n)
    all_grades = np.fromiter(
        chain.from_iterable(q.values() for q in qrels),
        dtype=np.float64,
        count=int(label_counts.sum()),
    )
    label_rows = np.repeat(np.arange(n), label_counts)
    n_relevant = np.bincount(label_rows, weights=all_grades > 0, minlength=n).astype(np.int64)
    order = np.lexsort((-all_grades, label_rows))
    label_starts = np.cumsum(label_counts) - label_counts
    rank_in_query = np.arange(order.size) - np.repeat(label_starts, label_counts)
    keep = (rank_in_query < k) & (all_grades[order] > 0)
    ideal = np.zeros((n, k))
    ideal[label_rows[order][keep], rank_in_query[keep]] = all_grades[order][keep]

    return RankedGrades(grades, judged, retrieved, n_relevant, ideal)


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
    return np.count_nonzero(rg.grades > 0, axis=1)


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
    relevant = rg.grades > 0
    first = np.argmax(relevant, axis=1)
    return np.where(relevant.any(axis=1), 1.0 / (first + 1.0), 0.0)


def _discounts(k: int) -> np.ndarray:
    return 1.0 / np.log2(np.arange(2, k + 2, dtype=np.float64))


def ndcg(rg: RankedGrades) -> np.ndarray:
    """trec_eval ndcg_cut: DCG of the top k over the DCG of the ideal top k."""
    discount = _discounts(rg.k)
    dcg = rg.grades @ discount
    idcg = rg.ideal @ discount
    out = np.full(dcg.shape, np.nan)
    np.divide(dcg, idcg, out=out, where=idcg > 0)
    return out


def precision(rg: RankedGrades) -> np.ndarray:
    """Hits in the top k over k (a short ranking is not rewarded for stopping early)."""
    return hits(rg) / float(rg.k)


def judged(rg: RankedGrades) -> np.ndarray:
    """Share of the top k that carries a label: low values mean the labels, not the
    retriever, limit what the other metrics can say."""
    return np.count_nonzero(rg.judged, axis=1) / float(rg.k)


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
