"""Score one recorded stage: per-query metrics, then overall, per-type and per-field aggregates.

Result layout (a superset of the `metrics.json` stage contract):

    {
      "overall":  {"n": 120, "recall@10": 0.61, ...},
      "by_type":  {"<type>": {"n": 40, "recall@10": ...}, ...},
      "by_<field>": {"<value>": {...}},          # one per `group_by` field, e.g. by_meta.city
      "counts": {
        "scored": 120,
        "excluded": {"<reason>": n, ...},
        "not_in_labels": 0,                      # run queries the labels do not know (ignored)
        "by_type": {"<type>": {"scored": n, "excluded": {"<reason>": n}}},
        "by_<field>": {"<value>": {"scored": n, "excluded": {...}}},
      },
      "per_query": {"<qid>": {"query_type": t, "n_relevant": g,
                              "hits@10": h, "recall@10": ..., ...}},   # scored queries only
      "excluded_queries": {"<qid>": "<reason>"},
    }

Every group dict carries `"n"`, the number of queries scored in it (use `metric_names` to
iterate over the metrics only). A group with no scored query has every metric set to None plus
`"undefined": "<reason>"` -- never 0, which would read as a retriever that found nothing. The
exclusion breakdown of each group lives in `counts`. Scored queries missing from a `group_by`
mapping fall in the group "(missing)". Groups are listed in sorted order.

Macro metrics (`recall@K`, `hit@K`, ...) are means of the per-query values; `recall_pooled@K`
is sum(hits@K) / sum(n_relevant) over the group, both in `per_query`. So every aggregate can be
recomputed from `per_query`. A pooled ratio whose denominator sums to 0 is None.

`summarise` builds this layout from any per-query columns; every other metric family (readable
recall, leak, entities, evidence: see `scoring.families`) goes through it, so each family's
result in `metrics.json` has exactly this shape, with its own scored and excluded counts.

A scorable query absent from `rankings` is excluded as "not_in_run" (TREC run files cannot hold
an empty ranking, and trec_eval skips such queries too). A query present with an empty ranking is
scored, and scores 0: the system was asked and returned nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any

import numpy as np

from retrieval_bench.scoring.labels import NOT_IN_RUN, UNKNOWN_TYPE, Judgements
from retrieval_bench.scoring.metrics import (
    RankedGrades,
    build_ranked_grades,
    build_ranked_grades_coded,
    condense,
    duplicate_rows,
    first_duplicate,
    hits,
    pad_labels,
    pad_rankings,
)
from retrieval_bench.scoring.registry import (
    CONDENSED_SUFFIX,
    DOC,
    measures,
    pooled_columns,
    reported,
)

MISSING_GROUP = "(missing)"


def metric_names(cutoffs: Sequence[int]) -> list[str]:
    """The doc metric keys of a group dict, in report order (excludes "n" and "undefined"):
    every `doc` measure of `scoring.registry` at every cut-off."""
    return names_at(reported(DOC), cutoffs)


def names_at(metrics: Sequence[str], cutoffs: Sequence[int]) -> list[str]:
    """`<metric>@<K>` for every metric (in the given order), then every checked cut-off: the
    `names` a family passes to `summarise`."""
    ks = check_cutoffs(cutoffs)
    return [f"{name}@{k}" for name in metrics for k in ks]


def check_cutoffs(cutoffs: Sequence[int]) -> list[int]:
    """The distinct cut-offs, ascending; ValueError unless each is a positive integer."""
    ks = sorted(set(cutoffs))
    if not ks:
        raise ValueError("at least one cut-off is needed")
    for k in ks:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k <= 0:
            raise ValueError(f"cut-offs must be positive integers, got {k!r}")
    return [int(k) for k in ks]


def check_rankings(rankings: Mapping[str, Sequence[str]]) -> None:
    """Refuse a ranking that is a bare string or holds an id twice.

    Duplicates are an upstream bug; silently deduplicating would score a ranking the system
    never produced. (`build_ranked_grades` runs the same check on the rankings it scores.)
    """
    for qid, ranking in rankings.items():
        if isinstance(ranking, str):
            raise TypeError(f"ranking for query {qid!r} is a string, not a sequence of ids")
        if len(set(ranking)) != len(ranking):
            doc = first_duplicate(ranking)
            raise ValueError(f"query {qid!r}: ranking holds id {doc!r} more than once")


def per_query_columns(
    rankings: Sequence[Sequence[str]],
    qrels: Sequence[Mapping[str, int]],
    cutoffs: Sequence[int],
    query_ids: Sequence[str] | None = None,
    only: Collection[str] | None = None,
) -> dict[str, np.ndarray]:
    """Every per-query number as a column over the batch: `n_relevant`, then for each K
    `hits@K` and each doc measure `name@K`. The vectorised core of `score_stage` (and what a
    benchmark should time against pytrec_eval): no per-query dicts are built. `only` limits
    the measures computed to those names (without `@K`), as pytrec_eval's measure set does."""
    ks = check_cutoffs(cutoffs)
    depth = _depth(ks, max(map(len, rankings), default=0), only)
    return _columns(build_ranked_grades(rankings, qrels, depth, query_ids), ks, only)


def per_query_columns_coded(
    rankings: np.ndarray,
    label_ids: np.ndarray,
    label_grades: np.ndarray,
    cutoffs: Sequence[int],
    check: bool = True,
    only: Collection[str] | None = None,
) -> dict[str, np.ndarray]:
    """`per_query_columns` from integer codes (see `metrics.build_ranked_grades_coded`): the
    job's path, where rankings are passage indices. Same columns, same values."""
    ks = check_cutoffs(cutoffs)
    depth = _depth(ks, rankings.shape[1] if rankings.ndim == 2 else 0, only)
    rg_all = build_ranked_grades_coded(rankings, label_ids, label_grades, depth, check)
    return _columns(rg_all, ks, only)


def _depth(ks: list[int], longest: int, only: Collection[str] | None) -> int:
    """How deep to read the rankings: the largest cut-off, or the whole ranking when a
    condensed measure is asked for (its top K is the first K judged ids, wherever they sit)."""
    condensed = [name for name in reported(DOC) if name.endswith(CONDENSED_SUFFIX)]
    if only is None or any(name in only for name in condensed):
        return max(*ks, longest)
    return max(ks)


def _columns(
    rg_all: RankedGrades, ks: list[int], only: Collection[str] | None = None
) -> dict[str, np.ndarray]:
    """The doc measure columns at every cut-off (those in `only`, default all): each
    measure's function on the rankings cut to K, and for a condensed one the same function on
    the judged ids cut to K (which needs the judged ids below K too: `_depth`)."""
    declared = [(m.name, m.fn, m.condensed) for m in measures(DOC) if m.fn is not None]
    plain = [(name, fn) for name, fn, _ in declared if only is None or name in only]
    condensed = [
        (name + CONDENSED_SUFFIX, fn)
        for name, fn, has_condensed in declared
        if has_condensed and (only is None or name + CONDENSED_SUFFIX in only)
    ]
    columns: dict[str, np.ndarray] = {"n_relevant": rg_all.n_relevant}
    for k in ks:
        rg = rg_all.truncate(k) if k < rg_all.k else rg_all
        columns[f"hits@{k}"] = hits(rg)
        for name, fn in plain:
            columns[f"{name}@{k}"] = fn(rg)
        if condensed:
            judged_only = condense(rg_all, k)
            for name, fn in condensed:
                columns[f"{name}@{k}"] = fn(judged_only)
    return columns


def score_stage(
    rankings: Mapping[str, Sequence[str]],
    judgements: Judgements,
    cutoffs: Sequence[int],
    group_by: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, Any]:
    """Score one stage's ranked ids against the judgements at every cut-off (layout above)."""
    ks = check_cutoffs(cutoffs)
    scored, types, excluded = _scope(rankings, judgements, group_by)
    qrels = judgements.qrels
    # Unscored rankings are checked here; scored ones while their grades are looked up.
    check_rankings({q: r for q, r in rankings.items() if q not in qrels})
    ranked = [rankings[q] for q in scored]
    for qid, ranking in zip(scored, ranked, strict=True):
        if isinstance(ranking, str):
            raise TypeError(f"ranking for query {qid!r} is a string, not a sequence of ids")
    columns = per_query_columns(ranked, [qrels[q] for q in scored], ks, scored)
    return _summarise_stage(columns, scored, types, excluded, ks, rankings, group_by)


@dataclass(frozen=True)
class CodedLabels:
    """A job's judgements coded once as the integer core takes them: `ids` and `grades`,
    (n, max labels) padded with -1 / 0, row `row_of[qid]` for each query of
    `judgements.qrels` (see `metrics.pad_labels`)."""

    row_of: dict[str, int]
    ids: np.ndarray
    grades: np.ndarray

    @classmethod
    def build(cls, judgements: Judgements, code: Mapping[str, int]) -> CodedLabels:
        ids, grades = pad_labels(list(judgements.qrels.values()), code)
        return cls({qid: i for i, qid in enumerate(judgements.qrels)}, ids, grades)


def score_stage_coded(
    rankings: Mapping[str, np.ndarray],
    judgements: Judgements,
    labels: CodedLabels,
    cutoffs: Sequence[int],
    group_by: Mapping[str, Mapping[str, str]] | None = None,
    check: bool = True,
) -> dict[str, Any]:
    """`score_stage` for rankings held as integer codes (a job's passage indices), scored
    against `labels` coded with the same codes: the same layout and the same values.

    `check=False` skips the duplicate check; only for rankings unique by construction (the
    caller says where that construction lives)."""
    ks = check_cutoffs(cutoffs)
    scored, types, excluded = _scope(rankings, judgements, group_by)
    rows = np.fromiter(map(labels.row_of.__getitem__, scored), dtype=np.int64, count=len(scored))
    if check:  # unscored rankings here; scored ones in the core
        unscored = [q for q in rankings if q not in judgements.qrels]
        bad = duplicate_rows(pad_rankings([rankings[q] for q in unscored]))
        if len(bad):
            qid = unscored[bad[0]]
            doc = first_duplicate(np.asarray(rankings[qid]).tolist())
            raise ValueError(f"query {qid!r}: ranking holds code {doc} more than once")
    try:
        columns = per_query_columns_coded(
            pad_rankings([rankings[q] for q in scored]),
            labels.ids[rows],
            labels.grades[rows],
            ks,
            check,
        )
    except ValueError as exc:  # name the query, not its row in the batch
        raise ValueError(_name_row(str(exc), scored)) from exc
    return _summarise_stage(columns, scored, types, excluded, ks, rankings, group_by)


def _name_row(message: str, scored: Sequence[str]) -> str:
    """'ranking #i: ...' or 'labels #i: ...' -> 'query <qid>: ...'."""
    head, sep, rest = message.partition(": ")
    _, hash_, row = head.partition(" #")
    if sep and hash_ and row.isdigit():
        return f"query {scored[int(row)]!r}: {rest}"
    return message


def _scope(
    rankings: Mapping[str, Any],
    judgements: Judgements,
    group_by: Mapping[str, Mapping[str, str]] | None,
) -> tuple[list[str], dict[str, str], dict[str, str]]:
    """(scored query ids, every query's type, excluded query -> reason) for one stage."""
    qrels = judgements.qrels
    types = dict(judgements.query_types)
    for qid in (*qrels, *judgements.excluded):
        types.setdefault(qid, UNKNOWN_TYPE)
    excluded = dict(judgements.excluded)
    scored = [qid for qid in qrels if qid in rankings]
    if len(scored) < len(qrels):
        excluded.update((qid, NOT_IN_RUN) for qid in qrels if qid not in rankings)
    return scored, types, excluded


def _summarise_stage(
    columns: Mapping[str, np.ndarray],
    scored: Sequence[str],
    types: Mapping[str, str],
    excluded: Mapping[str, str],
    ks: list[int],
    rankings: Mapping[str, Any],
    group_by: Mapping[str, Mapping[str, str]] | None,
) -> dict[str, Any]:
    return summarise(
        columns,
        scored,
        types,
        excluded,
        metric_names(ks),
        pooled=pooled_columns(DOC, ks),
        group_by=group_by,
        not_in_labels=sum(1 for qid in rankings if qid not in types),
    )


def summarise(
    columns: Mapping[str, np.ndarray],
    scored: Sequence[str],
    types: Mapping[str, str],
    excluded: Mapping[str, str],
    names: Sequence[str],
    pooled: Mapping[str, tuple[str, str]] | None = None,
    group_by: Mapping[str, Mapping[str, str]] | None = None,
    not_in_labels: int | None = None,
) -> dict[str, Any]:
    """The layout above for any per-query columns (`columns[c][i]` belongs to `scored[i]`).

    Every metric family (doc, readable, leak, entities, evidence) goes through here, so they
    all share one layout and one set of rules. `names` are macro means of the column of that
    name; `pooled` maps a metric name to (numerator column, denominator column) summed over the
    group (None when the denominator sums to 0). `types` should cover the whole evaluation set
    so that per-type exclusion counts are complete.
    """
    if group_by and "type" in group_by:
        raise ValueError('group_by field "type" would overwrite by_type; name it differently')
    types = dict(types)
    for qid in (*scored, *excluded):
        types.setdefault(qid, UNKNOWN_TYPE)
    pooled = dict(pooled or {})
    excluded_counts = _count(excluded.values())
    result: dict[str, Any] = {
        "overall": _aggregate(
            {"all": len(scored)},
            np.zeros(len(scored), dtype=np.int64),
            columns,
            names,
            {"all": excluded_counts},
            pooled,
        )["all"]
    }
    counts: dict[str, Any] = {"scored": len(scored), "excluded": excluded_counts}
    if not_in_labels is not None:
        counts["not_in_labels"] = not_in_labels
    fields: dict[str, Mapping[str, str]] = {"type": types, **(group_by or {})}
    for field, mapping in fields.items():
        value_of = {qid: str(mapping.get(qid, MISSING_GROUP)) for qid in types}
        groups = sorted(set(value_of.values()))
        index = {g: i for i, g in enumerate(groups)}
        codes = np.fromiter((index[value_of[q]] for q in scored), dtype=np.int64, count=len(scored))
        scored_n = np.bincount(codes, minlength=len(groups)).tolist()
        excl_by_group: dict[str, Counter[str]] = {g: Counter() for g in groups}
        for qid, reason in excluded.items():
            excl_by_group[value_of[qid]][reason] += 1
        group_excl = {g: dict(sorted(c.items())) for g, c in excl_by_group.items()}
        sizes = {g: scored_n[index[g]] for g in groups}
        result[f"by_{field}"] = _aggregate(sizes, codes, columns, names, group_excl, pooled)
        counts[f"by_{field}"] = {g: {"scored": sizes[g], "excluded": group_excl[g]} for g in groups}

    result["counts"] = counts
    result["per_query"] = _per_query(scored, types, columns)
    result["excluded_queries"] = dict(excluded)
    return result


def _count(reasons: Any) -> dict[str, int]:
    return dict(sorted(Counter(reasons).items()))


def _undefined_reason(excluded: Mapping[str, int]) -> str:
    if not excluded:
        return "no queries"
    detail = ", ".join(f"{reason}={n}" for reason, n in excluded.items())
    return f"no scorable queries (excluded: {detail})"


def _aggregate(
    sizes: Mapping[str, int],
    codes: np.ndarray,
    columns: Mapping[str, np.ndarray],
    names: Sequence[str],
    excluded: Mapping[str, Mapping[str, int]],
    pooled: Mapping[str, tuple[str, str]],
) -> dict[str, dict[str, Any]]:
    """Group means (macro) and pooled ratios for every group at once, via bincount."""
    groups = list(sizes)
    n_groups = len(groups)
    n = np.bincount(codes, minlength=n_groups).astype(np.float64)
    safe_n = np.where(n > 0, n, 1.0)
    means: dict[str, list[float | None]] = {}
    for name in names:
        if name in pooled:
            top, bottom = pooled[name]
            found = np.bincount(codes, weights=columns[top], minlength=n_groups)
            total = np.bincount(codes, weights=columns[bottom], minlength=n_groups)
            ratio = np.full(n_groups, np.nan)
            np.divide(found, total, out=ratio, where=total > 0)
        else:
            sums = np.bincount(codes, weights=columns[name], minlength=n_groups)
            ratio = sums / safe_n
        # NaN (a pooled ratio over nothing) becomes None: undefined, never 0.
        means[name] = [None if np.isnan(v) else v for v in ratio.tolist()]
    out: dict[str, dict[str, Any]] = {}
    for i, group in enumerate(groups):
        entry: dict[str, Any] = {"n": sizes[group]}
        if sizes[group] == 0:
            entry.update(dict.fromkeys(names))
            entry["undefined"] = _undefined_reason(excluded.get(group, {}))
        else:
            entry.update((name, means[name][i]) for name in names)
        out[group] = entry
    return out


def _per_query(
    scored: Sequence[str], types: Mapping[str, str], columns: Mapping[str, np.ndarray]
) -> dict[str, dict[str, Any]]:
    """One record per scored query, built from whole columns (tolist), not value by value."""
    keys = ["query_type", *columns]
    values = [[types[q] for q in scored]]
    for column in columns.values():
        integer = column.dtype.kind in "iub"  # counts stay integers, rates stay floats
        values.append(column.astype(np.int64 if integer else np.float64).tolist())
    records = map(dict, map(zip, repeat(keys), zip(*values, strict=True)))
    return dict(zip(scored, records, strict=True))
