"""Permissions: what the asking role may read, what leaked, and recall over what it may read.

A passage's `meta.acl` lists the roles that may read it; absent means everyone. Scoring reads
only the recorded ranked ids, `{passage id: acl}` and `{query id: user_role}`.

Who is asking. A query with a `user_role` is asked by that role. A query without one is asked
by nobody in particular: the pipeline's permission filter does not restrict it, so scoring does
not either (every passage is readable to it) and it is excluded from leak as "no_user_role".
An id absent from the ACL lookup (e.g. a foreign run) counts as public, as an absent `acl` does.

Leak (family `leak`; needs no relevance labels, so every query with a role and a ranking is
scored, whatever its label status: unreviewed and no_answer queries can leak too):

- `leaked@K`        per query: how many of the top K passages the role may not read
- `shown@K`         per query: min(K, length of the ranking)
- `leak@K`          macro mean of leaked@K / K (like precision@K: an empty slot leaks nothing)
- `leak_pooled@K`   sum leaked@K / sum shown@K: the share of every passage shown to the group
                    that its asker may not read (= the mean of leaked/shown weighted by shown;
                    undefined when nothing was shown)
- `leak_any@K`      share of queries with at least one unreadable passage in the top K

With the permission filter on, every arm ranks only readable passages, so all of these are
exactly 0; with `filters.permissions=false` they measure what the filter prevents.

Readable recall (family `readable`): the doc metric set of `scoring.metrics` against the labels
restricted to the relevant passages the role may read, every name prefixed `readable_`
(`readable_recall@K`, `readable_recall_pooled@K`, `readable_hit@K`, `readable_ndcg@K`, ...).
Unreadable labelled passages are dropped from the labels (a leaked one earns nothing). A query
whose relevant passages are all unreadable ("no_readable_relevant": the policy set's
`permission` queries) has nothing a permission-respecting system could find: it is excluded
here with that reason and evaluated by refusal (it should be refused) and by leak. The plain
doc metrics keep scoring it against its labels, where a correct system scores 0: both views are
reported, and the readable one is the headline for a permission-aware pipeline.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from itertools import islice
from typing import Any

import numpy as np

from retrieval_bench.scoring.aggregate import check_cutoffs, names_at, score_stage, summarise
from retrieval_bench.scoring.labels import NOT_IN_RUN, Judgements
from retrieval_bench.scoring.registry import READABLE_PREFIX, pooled_columns, reported

Acl = frozenset[str] | None

NO_USER_ROLE = "no_user_role"
NO_READABLE_RELEVANT = "no_readable_relevant"


def may_read(role: str | None, acl: Acl) -> bool:
    """True when the passage has no ACL, the query has no role, or the role is listed."""
    return acl is None or role is None or role in acl


def unreadable_queries(
    judgements: Judgements, roles: Mapping[str, str | None], acl: Mapping[str, Acl]
) -> list[str]:
    """Scorable queries none of whose relevant passages their role may read."""
    out = []
    for qid, labels in judgements.qrels.items():
        role = roles.get(qid)
        relevant = [pid for pid, grade in labels.items() if grade > 0]
        if relevant and not any(may_read(role, acl.get(pid)) for pid in relevant):
            out.append(qid)
    return out


def readable_judgements(
    judgements: Judgements, roles: Mapping[str, str | None], acl: Mapping[str, Acl]
) -> Judgements:
    """The judgements as the asking role sees them: labels of unreadable passages dropped,
    queries left with no readable relevant passage excluded as "no_readable_relevant"."""
    out = Judgements(
        query_types=dict(judgements.query_types),
        excluded=dict(judgements.excluded),
        no_answer=list(judgements.no_answer),
        missing_gold=dict(judgements.missing_gold),
    )
    for qid, labels in judgements.qrels.items():
        role = roles.get(qid)
        kept = {pid: g for pid, g in labels.items() if may_read(role, acl.get(pid))}
        if any(g > 0 for g in kept.values()):
            out.qrels[qid] = kept
        else:
            out.excluded[qid] = NO_READABLE_RELEVANT
    return out


def score_readable(
    rankings: Mapping[str, Sequence[str]],
    judgements: Judgements,
    roles: Mapping[str, str | None],
    acl: Mapping[str, Acl],
    cutoffs: Sequence[int],
    group_by: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, Any]:
    """The doc metric set over readable relevant passages, names prefixed `readable_`."""
    result = score_stage(rankings, readable_judgements(judgements, roles, acl), cutoffs, group_by)
    return prefix_metrics(result, READABLE_PREFIX)


def prefix_metrics(result: dict[str, Any], prefix: str) -> dict[str, Any]:
    """Rename every metric and per-query column of a `summarise` layout (not n, counts)."""
    keep = {"n", "undefined", "query_type"}

    def rename(group: Mapping[str, Any]) -> dict[str, Any]:
        return {(k if k in keep else prefix + k): v for k, v in group.items()}

    out = dict(result)
    out["overall"] = rename(result["overall"])
    for key, value in result.items():
        if key.startswith("by_"):
            out[key] = {g: rename(entry) for g, entry in value.items()}
    out["per_query"] = {q: rename(row) for q, row in result["per_query"].items()}
    return out


def unreadable_matrix(
    rankings: Sequence[Sequence[str]],
    roles: Sequence[str | None],
    acl: Mapping[str, Acl],
    k: int,
) -> tuple[np.ndarray, np.ndarray]:
    """(unreadable, shown), both (n_queries, k) bool: whether the passage at each rank exists
    and whether its asker may not read it. One table lookup for the whole batch: a
    (role x passage) readability table indexed by role codes and ranked-id codes."""
    n = len(rankings)
    ids = list(acl)
    index = {pid: i for i, pid in enumerate(ids)}
    public = len(ids)  # column for ids the lookup does not know: public
    role_names = sorted({r for r in roles if r is not None})
    role_code = {r: i for i, r in enumerate(role_names)}
    table = np.ones((len(role_names) + 1, len(ids) + 1), dtype=bool)  # last row: no role
    for j, pid in enumerate(ids):
        a = acl[pid]
        if a is not None:
            table[: len(role_names), j] = [r in a for r in role_names]
    codes = np.full((n, k), public, dtype=np.int64)
    shown = np.zeros((n, k), dtype=bool)
    for i, ranking in enumerate(rankings):
        top = [index.get(pid, public) for pid in islice(ranking, k)]
        codes[i, : len(top)] = top
        shown[i, : len(top)] = True
    rows = np.array([role_code.get(r, len(role_names)) if r else len(role_names) for r in roles])
    readable = table[rows.reshape(-1, 1), codes] if n else np.ones((0, k), dtype=bool)
    return ~readable & shown, shown


def leak_columns(
    rankings: Sequence[Sequence[str]],
    roles: Sequence[str | None],
    acl: Mapping[str, Acl],
    cutoffs: Sequence[int],
) -> dict[str, np.ndarray]:
    """Per-query leak columns at every cut-off (definitions in the module docstring)."""
    ks = check_cutoffs(cutoffs)
    unreadable, shown = unreadable_matrix(rankings, roles, acl, max(ks))
    columns: dict[str, np.ndarray] = {}
    for k in ks:
        leaked = unreadable[:, :k].sum(axis=1)
        columns[f"leaked@{k}"] = leaked
        columns[f"shown@{k}"] = shown[:, :k].sum(axis=1)
        columns[f"leak@{k}"] = leaked / float(k)
        columns[f"leak_any@{k}"] = (leaked > 0).astype(np.float64)
    return columns


def leak_names(cutoffs: Sequence[int]) -> list[str]:
    return names_at(reported("leak"), cutoffs)


def score_leak(
    rankings: Mapping[str, Sequence[str]],
    query_types: Mapping[str, str],
    roles: Mapping[str, str | None],
    acl: Mapping[str, Acl],
    cutoffs: Sequence[int],
    group_by: Mapping[str, Mapping[str, str]] | None = None,
    queries: Collection[str] | None = None,
) -> dict[str, Any]:
    """Leak for every query of `queries` (default: all of `query_types`) that has a role and a
    ranking; the rest are excluded as "no_user_role" or "not_in_run"."""
    ks = check_cutoffs(cutoffs)
    excluded: dict[str, str] = {}
    scored: list[str] = []
    for qid in query_types if queries is None else queries:
        if not roles.get(qid):
            excluded[qid] = NO_USER_ROLE
        elif qid not in rankings:
            excluded[qid] = NOT_IN_RUN
        else:
            scored.append(qid)
    columns = leak_columns([rankings[q] for q in scored], [roles[q] for q in scored], acl, ks)
    pooled = pooled_columns("leak", ks)
    return summarise(columns, scored, query_types, excluded, leak_names(ks), pooled, group_by)
