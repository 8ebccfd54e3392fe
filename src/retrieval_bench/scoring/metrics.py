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
- map@k       trec_eval map_cut_k (average precision cut to k): the precision at the rank of
              each relevant id within the top k, summed, over the number of relevant ids (all
              of them, not min(k, |G|)); at k >= the ranking's length it is trec_eval's map
- recall_bound@k  min(k, |G|) / |G|: the best recall@k any ranking could reach
- all_hit@k   1 if every relevant id is in the top k
- judged@k    share of the top k carrying any label (grade > 0, or judged non-relevant with
              grade <= 0), over k
- <metric>_condensed@k  the metric on Sakai's condensed list: every unjudged id removed from
              the whole ranking before cutting to k (ir_measures' "judged only"; trec_eval on
              the run without its unjudged ids), for recall, hit, mrr and ndcg. Beside the
              plain metric it shows how much unjudged passages, which the plain metric counts
              as non-relevant, cost a system (`condense`)

Each function is declared, with its name, direction and ir_measures spelling, in
`scoring.registry`, which is what scoring and every report read. Every metric takes a
`RankedGrades`, built once per (stage, max cut-off) by one of two front
doors -- `build_ranked_grades` from id strings (TREC runs, `run.score`), or the integer core
`build_ranked_grades_coded` from passage indices (a job's path, vectorised end to end) --
and cut down with `truncate` for smaller cut-offs; it stores only where the labelled ids sit
(a sparse layout), so every metric is a bincount over a few entries per query. Metrics that
divide by the number of relevant ids (recall, recall_bound, all_hit, ndcg) return NaN for a
query with none; aggregation never feeds such queries in (they are excluded), so NaN marks a
bug rather than hiding one as 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import chain

import numpy as np

from retrieval_bench.scoring.coded_kernel import match_rows

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

    @cached_property
    def hit_counts(self) -> np.ndarray:
        """Relevant ids in each top k: counted once, read by recall, hit, all_hit,
        precision and the pooled recall."""
        return np.bincount(self.row[self.grade > 0], minlength=self.n)

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
    """The string front door: find every labelled id in its ranking, keep those in the top k.

    `rankings[i]` is scored against `qrels[i]`. A ranking holding an id twice raises ValueError
    (named by `query_ids[i]` when given): duplicates are an upstream bug, and deduplicating
    would score a ranking the system never produced. The whole ranking is checked, not just
    its top k.

    Speed: per query, one C-level `set` of the ranking (the duplicate check, which touches each
    id once), the labelled ids it holds (`labels.keys() & seen`, a handful), and their
    positions (`list.index`, over strings the set just brought into cache). Coding every id
    to an integer first and using `build_ranked_grades_coded` would cost one global dict lookup
    per ranked id, which measured over 10x slower than this at 10 million ids (cache misses over
    a dict of a million strings); both doors share `_assemble` and the metric functions.
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
    order = np.argsort(row * k + rank, kind="stable")

    # Ideal ranking: every grade > 0 of the query, best first (sparse: any label count).
    label_counts = np.fromiter(map(len, qrels), dtype=np.int64, count=n)
    all_grades = np.fromiter(
        chain.from_iterable(q.values() for q in qrels),
        dtype=np.float64,
        count=int(label_counts.sum()),
    )
    positive = all_grades > 0
    ideal_row = np.repeat(np.arange(n), label_counts)[positive]
    ideal_grade = all_grades[positive]
    if len(ideal_grade):
        # Rows are already ascending: a stable sort on (row, -grade) is nearly presorted.
        top = float(ideal_grade.max())
        best = np.argsort(ideal_row * (top + 1.0) + (top - ideal_grade), kind="stable")
        ideal_row, ideal_grade = ideal_row[best], ideal_grade[best]
    return _assemble(k, lengths, row[order], rank[order], grade[order], ideal_row, ideal_grade)


def build_ranked_grades_coded(
    rankings: np.ndarray,
    label_ids: np.ndarray,
    label_grades: np.ndarray,
    k: int,
    check: bool = True,
) -> RankedGrades:
    """The integer core: rankings and labels as integer codes (e.g. passage indices).

    `rankings` is (n_queries, depth), best first, padded at the end with -1; `label_ids` is
    (n_queries, L), the codes of each query's labelled ids (unique within a row), padded with
    -1, with `label_grades` parallel to it (padding 0). A label id < 0 matches nothing: it is
    padding, or a labelled id the rankings cannot hold, whose grade still counts in n_relevant
    and the ideal ranking.

    `check=True` refuses a row holding a code twice and padding before the end of a row (one
    row-wise sort, vectorised). Pass False only for rankings unique by construction, and say
    where in code that construction lives; external runs are always checked.
    """
    if k <= 0:
        raise ValueError(f"k must be positive, got {k}")
    rankings = np.asarray(rankings)
    label_ids = np.asarray(label_ids)
    label_grades = np.asarray(label_grades)
    for name, array in (("rankings", rankings), ("label ids", label_ids)):
        if array.ndim != 2 or array.dtype.kind not in "iu":
            raise ValueError(f"{name} must be a 2-D integer array, got {array.dtype}")
    n = len(rankings)
    if label_ids.shape != label_grades.shape or label_ids.ndim != 2 or len(label_ids) != n:
        raise ValueError(
            f"{n} rankings but label ids {label_ids.shape} and grades {label_grades.shape}"
        )
    # Each row's labels sorted ascending (padding first), for the binary search below.
    order = np.argsort(label_ids, axis=1, kind="stable")
    sorted_ids = np.take_along_axis(label_ids, order, axis=1)
    sorted_grades = np.take_along_axis(label_grades, order, axis=1)
    twice = (sorted_ids[:, 1:] == sorted_ids[:, :-1]) & (sorted_ids[:, 1:] >= 0)
    # The compiled pass (coded_kernel) where built: the same checks and arrays in one pass.
    compiled = match_rows(rankings, sorted_ids, k, check) if not twice.any() else None
    if check:
        bad = duplicate_rows(rankings) if compiled is None else _found(compiled[4])
        if len(bad):
            ranking = rankings[bad[0]]
            code = first_duplicate(ranking[ranking >= 0].tolist())
            raise ValueError(f"ranking #{bad[0]}: ranking holds code {code} more than once")
    if compiled is None:
        lengths = _lengths(rankings, k, check)
    elif compiled[5] >= 0:
        raise ValueError(f"ranking #{compiled[5]}: padding (-1) before the end of the ranking")
    if twice.any():
        bad_row = int(np.flatnonzero(twice.any(axis=1))[0])
        raise ValueError(f"labels #{bad_row}: a labelled code appears twice")
    if compiled is None:
        row, rank, column = _match(rankings[:, :k].astype(np.int64, copy=False), sorted_ids)
    else:
        lengths, row, rank, column = compiled[:4]
    grade = sorted_grades[row, column].astype(np.float64)
    # Ideal ranking: each row's grades > 0, best first (a row-wise sort of a narrow matrix).
    best = -np.sort(-np.where(label_grades > 0, label_grades, 0), axis=1)
    ideal_row, ideal_column = np.nonzero(best > 0)
    ideal_grade = best[ideal_row, ideal_column].astype(np.float64)
    return _assemble(k, lengths, row, rank, grade, ideal_row, ideal_grade)


def _found(row: int) -> np.ndarray:
    """A row number from the compiled pass (-1: none) as duplicate_rows reports rows."""
    return np.asarray([row] if row >= 0 else [], dtype=np.int64)


# Ranked entries filtered per chunk of queries: bounds the temporaries to a few MiB.
_CHUNK = 1 << 18


def _match(top: np.ndarray, sorted_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row, rank, label column) of every ranked code that is one of its row's labels,
    ordered by (row, rank). `top` holds int64 codes; `sorted_ids` each row's labels ascending.

    Most ranked codes are unlabelled, so a 64-bit Bloom filter per row (bit `code % 64` of
    each label) discards ~1 - L/64 of them with three in-place elementwise operations; the
    survivors are found exactly by a binary search in their row's sorted labels (log2 L
    vectorised steps). Memory stays bounded for any label count: the work is chunked by
    queries and only survivors are searched, so many labels cost time, not memory.
    """
    n, depth = top.shape
    width = sorted_ids.shape[1]
    empty = np.zeros(0, dtype=np.int64)
    if n == 0 or depth == 0 or width == 0:
        return empty, empty, empty
    bloom = np.zeros(n, dtype=np.int64)
    for column in sorted_ids.T:  # bit 63 is the sign bit: >> then & 1 still reads it
        bloom |= np.where(column >= 0, np.left_shift(1, column & 63), 0)
    flat_ids = sorted_ids.ravel()
    rows: list[np.ndarray] = []
    ranks: list[np.ndarray] = []
    columns: list[np.ndarray] = []
    step = max(1, _CHUNK // depth)
    for start in range(0, n, step):
        block = top[start : start + step]
        bits = block & 63
        np.right_shift(bloom[start : start + step, None], bits, out=bits)
        np.bitwise_and(bits, 1, out=bits)
        row, rank = np.divmod(np.flatnonzero(bits), depth)
        codes = block[row, rank]
        live = codes >= 0
        row, rank, codes = row[live] + start, rank[live], codes[live]
        # Branch-free lower bound of each code in its row's sorted labels: the same
        # ceil(log2 L) steps for every survivor; the answer stays in [at, at + size].
        first = row * width
        at = first.copy()
        size = width
        while size > 1:
            half = size // 2
            at = np.where(flat_ids[at + half] < codes, at + half, at)
            size -= half
        at += flat_ids[at] < codes
        lo = at - first
        hit = flat_ids[np.minimum(at, first + width - 1)] == codes
        rows.append(row[hit])
        ranks.append(rank[hit])
        columns.append(lo[hit])
    return np.concatenate(rows), np.concatenate(ranks), np.concatenate(columns)


def _pad(values: np.ndarray, counts: np.ndarray, fill: int) -> np.ndarray:
    """Concatenated per-row values -> a (rows, max count) matrix padded with `fill`."""
    width = int(counts.max()) if len(counts) else 0
    out = np.full((len(counts), width), fill, dtype=values.dtype)
    out[np.arange(width) < counts[:, None]] = values
    return out


def pad_rankings(rankings: Sequence[np.ndarray]) -> np.ndarray:
    """Per-query integer rankings (e.g. `Ranked.indices`) -> the (n, depth) matrix the
    integer core takes, padded with -1; no copy per row when all have one length."""
    counts = np.fromiter(map(len, rankings), dtype=np.int64, count=len(rankings))
    if not len(counts):
        return np.full((0, 0), -1, dtype=np.int64)
    flat = np.concatenate(rankings).astype(np.int64, copy=False)
    if (counts == counts[0]).all():
        return flat.reshape(len(counts), int(counts[0]))
    return _pad(flat, counts, -1)


def pad_labels(
    qrels: Sequence[Mapping[str, int]], code: Mapping[str, int]
) -> tuple[np.ndarray, np.ndarray]:
    """Labels as the integer core takes them: (ids, grades), each (n, max labels), ids coded
    with `code` (an id it lacks gets -1: matches nothing, its grade still counts), padded with
    -1 / 0. A job builds this once, with passage indices as codes."""
    counts = np.fromiter(map(len, qrels), dtype=np.int64, count=len(qrels))
    total = int(counts.sum())
    ids = np.fromiter(
        (code.get(doc, -1) for doc in chain.from_iterable(qrels)), dtype=np.int64, count=total
    )
    grades = np.fromiter(
        chain.from_iterable(q.values() for q in qrels), dtype=np.int64, count=total
    )
    return _pad(ids, counts, -1), _pad(grades, counts, 0)


def duplicate_rows(rankings: np.ndarray) -> np.ndarray:
    """Rows of an integer ranking matrix that hold a code (>= 0) twice: a row-wise sort,
    by chunks of rows so the sorted copy stays small."""
    n, depth = rankings.shape
    bad: list[np.ndarray] = []
    step = max(1, _CHUNK // max(depth, 1))
    for start in range(0, n, step):
        ordered = np.sort(rankings[start : start + step], axis=1)
        twice = (ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] >= 0)
        bad.append(np.flatnonzero(twice.any(axis=1)) + start)
    return np.concatenate(bad) if bad else np.zeros(0, dtype=np.int64)


def _lengths(rankings: np.ndarray, k: int, check: bool) -> np.ndarray:
    """Ranked codes per row within the top k; with `check`, ValueError where padding (< 0)
    comes before a code, which would make those lengths wrong. By chunks of rows."""
    n, depth = rankings.shape
    lengths = np.empty(n, dtype=np.int64)
    step = max(1, _CHUNK // max(depth, 1))
    for start in range(0, n, step):
        present = rankings[start : start + step] >= 0
        lengths[start : start + step] = np.count_nonzero(present[:, :k], axis=1)
        if check:
            late = (present[:, 1:] & ~present[:, :-1]).any(axis=1)
            if late.any():
                row = start + int(np.flatnonzero(late)[0])
                raise ValueError(f"ranking #{row}: padding (-1) before the end of the ranking")
    return lengths


def _assemble(
    k: int,
    lengths: np.ndarray,
    row: np.ndarray,
    rank: np.ndarray,
    grade: np.ndarray,
    ideal_row: np.ndarray,
    ideal_grade: np.ndarray,
) -> RankedGrades:
    """RankedGrades from the matches (ordered by (row, rank)) and every query's grades > 0
    (ordered by row, then grade descending), both cut to k; shared by both front doors."""
    n = len(lengths)
    keep = rank < k
    n_relevant = np.bincount(ideal_row, minlength=n).astype(np.int64)
    starts = np.cumsum(n_relevant) - n_relevant
    ideal_pos = np.arange(len(ideal_row)) - starts[ideal_row]
    cut = ideal_pos < k
    return RankedGrades(
        k=k,
        lengths=lengths,
        row=row[keep].astype(np.int64, copy=False),
        rank=rank[keep].astype(np.int64, copy=False),
        grade=grade[keep],
        n_relevant=n_relevant,
        ideal_row=ideal_row[cut].astype(np.int64, copy=False),
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
    return rg.hit_counts


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


def average_precision(rg: RankedGrades) -> np.ndarray:
    """trec_eval map_cut: sum of the precision at each relevant id's rank within the top k,
    over the number of relevant ids (NaN without relevant ids).

    Entries are ordered by (row, rank), so a relevant entry's ordinal within its row is the
    number of relevant ids at or above its rank; bincount adds the terms in rank order, as
    trec_eval does."""
    relevant = rg.grade > 0
    rows, ranks = rg.row[relevant], rg.rank[relevant]
    per_row = np.bincount(rows, minlength=rg.n)
    first_of_row = np.cumsum(per_row) - per_row
    ordinal = np.arange(len(rows), dtype=np.float64) - first_of_row[rows] + 1.0
    precisions = ordinal / (ranks + 1.0)
    return _per_relevant(np.bincount(rows, weights=precisions, minlength=rg.n), rg)


def precision(rg: RankedGrades) -> np.ndarray:
    """Hits in the top k over k (a short ranking is not rewarded for stopping early)."""
    return hits(rg) / float(rg.k)


def judged(rg: RankedGrades) -> np.ndarray:
    """Share of the top k that carries a label: low values mean the labels, not the
    retriever, limit what the other metrics can say."""
    return np.bincount(rg.row, minlength=rg.n) / float(rg.k)


def condense(rg: RankedGrades, k: int) -> RankedGrades:
    """Sakai's condensed list cut to k: each ranking with its unjudged ids removed, so the
    judged ids close ranks, then the top k of what is left.

    `rg` must hold every judged id of each whole ranking (built with k >= the longest ranking,
    as `aggregate._depth` asks for), or judged ids below its k would be missed. Its entries are
    ordered by (row, rank), so an entry's condensed rank is its ordinal within its row."""
    if k <= 0:
        raise ValueError(f"k must be positive, got {k}")
    judged_per_row = np.bincount(rg.row, minlength=rg.n)
    first_of_row = np.cumsum(judged_per_row) - judged_per_row
    ordinal = np.arange(len(rg.row), dtype=np.int64) - first_of_row[rg.row]
    keep = ordinal < k
    ideal = rg.ideal_pos < k
    return RankedGrades(
        k=k,
        lengths=np.minimum(judged_per_row, k).astype(np.int64),
        row=rg.row[keep],
        rank=ordinal[keep],
        grade=rg.grade[keep],
        n_relevant=rg.n_relevant,
        ideal_row=rg.ideal_row[ideal],
        ideal_pos=rg.ideal_pos[ideal],
        ideal_grade=rg.ideal_grade[ideal],
    )
