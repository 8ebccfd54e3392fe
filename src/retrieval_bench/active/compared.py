"""The queries of a comparison as arrays: each compared system's top K as passage codes, the
pooled pairs (per query, every passage in any system's top K, once), and the per-query metric
of every system under any labels, computed by the project's own metric functions
(`scoring.metrics`, through `build_ranked_grades_coded`), so a value here is the value a job
reports for the same ranking and labels.

A query whose labels hold no relevant passage has no metric value (the scorer excludes it);
here it counts 0 (no system found anything relevant), which only a prediction (a draw of the
judge's labels) can meet: the queries of a plan each hold a relevant passage by people's labels.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from retrieval_bench.errors import ConfigError
from retrieval_bench.scoring.metrics import build_ranked_grades_coded
from retrieval_bench.scoring.registry import find

NO_CODE = -1


def parse_metric(spec: str, top_k: int, key: str) -> tuple[str, int]:
    """(`ndcg`, 10) from `ndcg@10`, or from `ndcg@K` with the jobs' `top_k`; ConfigError naming
    `key` for a name no per-query measure reports or a malformed cut-off."""
    name, at, cut = spec.partition("@")
    try:
        measure = find(name)
    except KeyError:
        measure = None
    if measure is None or measure.fn is None or measure.pooled is not None:
        raise ConfigError(key, f"{spec!r}: not a per-query ranking metric (e.g. ndcg@K)")
    if not at or not (cut == "K" or cut.isdigit()):
        raise ConfigError(key, f"{spec!r}: give a cut-off, e.g. {name}@K or {name}@10")
    k = top_k if cut == "K" else int(cut)
    if not 0 < k <= top_k:
        raise ConfigError(key, f"{spec!r}: the cut-off must be within 1..{top_k} (the jobs' top_k)")
    return measure.name, k


@dataclass(frozen=True)
class Compared:
    """N queries ranked by S systems (module docstring). `rankings` is (S, N, depth) passage
    codes padded with -1; `pair_query` and `pair_code` list the pooled pairs, query by query
    in the order the systems ranked them (the first system's top K, then what the others add);
    `pair_slot` is each pair's column in its query's row of `pool_layout`."""

    query_ids: tuple[str, ...]
    query_types: tuple[str, ...]
    systems: tuple[str, ...]
    passage_ids: tuple[str, ...]
    rankings: np.ndarray
    pair_query: np.ndarray
    pair_code: np.ndarray
    pair_slot: np.ndarray
    depth: int

    @classmethod
    def build(
        cls,
        query_ids: Sequence[str],
        query_types: Sequence[str],
        tops: Mapping[str, Mapping[str, Sequence[str]]],
        depth: int,
    ) -> Compared:
        """From each system's ranked ids per query (`tops[system][query id]`), cut to
        `depth`. A query a system did not rank has an empty ranking there."""
        systems = tuple(tops)
        codes: dict[str, int] = {}
        n = len(query_ids)
        rankings = np.full((len(systems), n, depth), NO_CODE, dtype=np.int64)
        pair_query: list[int] = []
        pair_code: list[int] = []
        pair_slot: list[int] = []
        for row, qid in enumerate(query_ids):
            seen: dict[int, int] = {}
            for s, system in enumerate(systems):
                ids = list(tops[system].get(qid, ()))[:depth]
                for rank, pid in enumerate(ids):
                    code = codes.setdefault(pid, len(codes))
                    rankings[s, row, rank] = code
                    if code not in seen:
                        seen[code] = len(seen)
                        pair_query.append(row)
                        pair_code.append(code)
                        pair_slot.append(seen[code])
        return cls(
            tuple(query_ids),
            tuple(query_types),
            systems,
            tuple(codes),
            rankings,
            np.asarray(pair_query, dtype=np.int64),
            np.asarray(pair_code, dtype=np.int64),
            np.asarray(pair_slot, dtype=np.int64),
            depth,
        )

    @property
    def n(self) -> int:
        return len(self.query_ids)

    def best_ranks(self) -> np.ndarray:
        """Each pooled pair's best (0-based) rank over the systems' rankings."""
        ranks = np.full(len(self.pair_code), self.depth, dtype=np.int64)
        positions = np.arange(self.depth)
        for s in range(len(self.systems)):
            rows = self.rankings[s][self.pair_query]
            hit = rows == self.pair_code[:, None]
            found = hit.any(axis=1)
            ranks = np.where(found, np.minimum(ranks, (hit * positions).sum(axis=1)), ranks)
        return ranks

    @property
    def pairs_per_query(self) -> np.ndarray:
        return np.bincount(self.pair_query, minlength=self.n)

    def pair_ids(self) -> list[tuple[str, str]]:
        """(query id, passage id) of every pooled pair, in pair order."""
        return [
            (self.query_ids[q], self.passage_ids[c])
            for q, c in zip(self.pair_query.tolist(), self.pair_code.tolist(), strict=True)
        ]

    def pool_layout(self) -> np.ndarray:
        """(N, widest pool) codes of each query's pooled pairs, padded with -1."""
        width = int(self.pairs_per_query.max(initial=0))
        out = np.full((self.n, max(width, 1)), NO_CODE, dtype=np.int64)
        out[self.pair_query, self.pair_slot] = self.pair_code
        return out

    def label_layout(
        self, labels: Sequence[Mapping[str, int]], skip_pooled: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """(codes, grades), each (N, widest), of each query's `labels` (passage id -> grade);
        a passage no system ranked gets code -1 (it still counts in the ideal ranking and the
        number of relevant passages). `skip_pooled` leaves out the pooled pairs' labels (they
        are drawn or given separately, in `pool_layout`'s columns)."""
        pooled = self.pool_layout() if skip_pooled else None
        index = {pid: code for code, pid in enumerate(self.passage_ids)}
        rows: list[list[tuple[int, float]]] = []
        for row, query_labels in enumerate(labels):
            kept = []
            in_pool = set(pooled[row].tolist()) if pooled is not None else set()
            for pid, grade in query_labels.items():
                code = index.get(pid, NO_CODE)
                if code != NO_CODE and code in in_pool:
                    continue
                if code == NO_CODE and grade <= 0:
                    continue  # a judged non-relevant passage no system ranked changes nothing
                kept.append((code, float(grade)))
            rows.append(kept)
        width = max(1, max((len(r) for r in rows), default=0))
        codes = np.full((self.n, width), NO_CODE, dtype=np.int64)
        grades = np.zeros((self.n, width))
        for row, kept in enumerate(rows):
            for col, (code, value) in enumerate(kept):
                codes[row, col] = code
                grades[row, col] = value
        return codes, grades

    def values(
        self,
        metric: str,
        k: int,
        codes: np.ndarray,
        grades: np.ndarray,
        rows: np.ndarray | None = None,
    ) -> np.ndarray:
        """(S, R) the metric of each system's ranking of query `rows[r]` (default: every query
        in order) against the labels of row r of (`codes`, `grades`); 0 where the labels hold
        no relevant passage (module docstring)."""
        fn = find(metric).fn
        assert fn is not None  # parse_metric admits per-query measures only
        rows = np.arange(self.n) if rows is None else np.asarray(rows)
        out = np.empty((len(self.systems), len(rows)))
        for s in range(len(self.systems)):
            # The rankings are unique by construction (a job's stored ranking, checked when it
            # was written; `build` keeps its order), and so are each row's label codes.
            graded = build_ranked_grades_coded(self.rankings[s][rows], codes, grades, k)
            out[s] = np.nan_to_num(fn(graded), nan=0.0)
        return out
