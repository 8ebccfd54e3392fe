"""Robustness: how a retriever's scores move when its queries are perturbed.

Every variant (a query rewritten by `retrieval_bench.perturb`, linked to its original) is scored
with the same labels as its original, at the stage comparisons read (`compare.stage`, `final`
by default). Per kind and query type (and `all`), two numbers:

* the paired difference, variant minus original, of each metric of `robustness.metrics` on the
  queries that have a variant of that kind, tested with the project's sign-flip test and
  adjusted over a family (`compare.family`: `cell`, one kind x type x metric; `metric`, every
  cell of one metric; `table`, every cell) by `compare.correction`, the discipline of every
  verdict here (`stats.verdicts.delta_families`). Verdict: `degrades` / `improves` (the
  difference is significant, in the metric's own direction), `holds` (not significant), or
  no verdict where too few queries could ever be significant; `no effect by construction
  (normalised before every arm)` where every variant of the cell is its original once the
  text normalisation every query goes through (NFKC, ASCII lowercase: `text.tokenizer.normalise`)
  is applied, and no value moved (the width kinds: `fullwidth`, `halfwidth`): not a test, so
  outside the family, and never reported as `holds`, which would claim evidence;
* `stable@K`: the share of those queries whose hit@K is the same for the variant as for the
  original (both found a relevant passage in the top K, or both did not).

A job computes this for itself (`metrics.json` `robustness`); a sweep's comparison computes it
again across its jobs, one family over every arm (`compare.robustness`), from the same rows.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from retrieval_bench.io.strict_json import json_number
from retrieval_bench.records import PERTURBATION, PERTURBED_FROM, QueryRecord
from retrieval_bench.scoring.labels import Judgements
from retrieval_bench.scoring.records import score_records
from retrieval_bench.scoring.registry import lower_is_better
from retrieval_bench.stats.settings import SignificanceSettings
from retrieval_bench.stats.verdicts import ALL, Delta, delta_families, family_key, ordered_types
from retrieval_bench.text.tokenizer import normalise

DEGRADES, IMPROVES, HOLDS = "degrades", "improves", "holds"
NO_EFFECT = "no effect by construction (normalised before every arm)"
# A variant row's flag: its text and its original's are the same once normalised.
NORMALISED_ALIKE = "normalised_as_original"
# The registry's robustness measure (scoring.registry, family `robustness`).
STABLE = "stable"
KIND = "kind"

Key = TypeVar("Key", bound=Hashable)
# Per-query rows of one stage (metrics.json `per_query`): query id -> {metric: value, ...}.
Rows = Mapping[str, Mapping[str, Any]]


def stable_name(k: int) -> str:
    return f"{STABLE}@{k}"


def variant_rows(
    records: Sequence[QueryRecord],
    judgements: Judgements,
    originals: Rows,
    cutoffs: Sequence[int],
    stage: str,
    passage_ids: Sequence[str] | None = None,
    doc_of: Mapping[str, str] | None = None,
    original_texts: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The variants' `stage` scored as the originals are (`scoring.records.score_records`), each
    per-query row with its original (`perturbed_from`), its `kind` and `stable@k` at every
    cut-off (1 when its hit@k equals its original's, 0 when not; absent when the original was
    not scored); with `original_texts` (original id -> query), `normalised_as_original`:
    whether the variant's text is its original's once normalised (`text.tokenizer.normalise`)."""
    trimmed = [
        replace(r, stages={stage: r.stages[stage]} if stage in r.stages else {}, baselines={})
        for r in records
    ]
    scored = score_records(trimmed, judgements, list(cutoffs), passage_ids=passage_ids,
                           doc_of=doc_of)["stages"][stage]  # fmt: skip
    by_id = {r.query.query_id: r.query for r in records}
    for qid, row in scored["per_query"].items():
        query = by_id[qid]
        original = originals.get(str(query.perturbed_from)) or {}
        row[PERTURBED_FROM] = query.perturbed_from
        row[KIND] = str((query.meta.get(PERTURBATION) or {}).get(KIND, "unknown"))
        source_text = (original_texts or {}).get(str(query.perturbed_from))
        if source_text is not None:
            row[NORMALISED_ALIKE] = normalise(query.query) == normalise(source_text)
        for k in cutoffs:
            hit = f"hit@{k}"
            if hit in original and hit in row:
                row[stable_name(k)] = float(row[hit] == original[hit])
    return dict(scored)


def kind_pairs(
    originals: Rows, variants: Rows, metric: str
) -> dict[tuple[str, str], tuple[dict[str, float], dict[str, float]]]:
    """(kind, type) -> (original values, variant values), both keyed by the original's id, for
    the variants of that kind and type (`all`: every type) whose original was scored."""
    out: dict[tuple[str, str], tuple[dict[str, float], dict[str, float]]] = {}
    for row in variants.values():
        source = str(row.get(PERTURBED_FROM))
        original = originals.get(source)
        if original is None or row.get(metric) is None or original.get(metric) is None:
            continue
        for qtype in (str(row.get("query_type", "unknown")), ALL):
            before, after = out.setdefault((str(row[KIND]), qtype), ({}, {}))
            before[source], after[source] = float(original[metric]), float(row[metric])
    return out


def stable_shares(variants: Rows, k: int) -> dict[tuple[str, str], dict[str, Any]]:
    """(kind, type) -> `{"stable": share, "n": queries}` of stable@k (`all`: every type)."""
    name = stable_name(k)
    counts: dict[tuple[str, str], list[float]] = {}
    for row in variants.values():
        if row.get(name) is None:
            continue
        for qtype in (str(row.get("query_type", "unknown")), ALL):
            counts.setdefault((str(row[KIND]), qtype), []).append(float(row[name]))
    return {
        key: {"stable": sum(values) / len(values), "n": len(values)}
        for key, values in counts.items()
    }


def normalised_alike(variants: Rows) -> set[tuple[str, str]]:
    """(kind, type) (`all`: every type) whose every variant row is its original once normalised
    (`normalised_as_original`; a row without the flag, from an older job, is not)."""
    alike: dict[tuple[str, str], bool] = {}
    for row in variants.values():
        for qtype in (str(row.get("query_type", "unknown")), ALL):
            key = (str(row[KIND]), qtype)
            alike[key] = alike.get(key, True) and row.get(NORMALISED_ALIKE) is True
    return {key for key, every in alike.items() if every}


def verdict(delta: Delta, metric: str) -> str:
    """`degrades`, `improves` or `holds`; '' (no verdict) where too few queries decide."""
    if delta.note:
        return ""
    if not delta.significant:
        return HOLDS
    better = delta.diff < 0 if lower_is_better(metric) else delta.diff > 0
    return IMPROVES if better else DEGRADES


def robustness_cells(
    pairs: Mapping[Key, tuple[Mapping[str, float], Mapping[str, float]]],
    settings: SignificanceSettings,
    min_queries: int,
    family: str,
    alike: Collection[Key] = (),
) -> dict[Key, dict[str, Any]]:
    """Each cell (a key whose first part is the metric) tested, variant minus original,
    adjusted over its family (`comparison.family_key`); strict JSON. A cell of `alike` (every
    variant its original once normalised) whose values did not move is `no effect by
    construction`, not a test: outside the family (module docstring)."""
    constructed = {
        key
        for key in alike
        if key in pairs and pairs[key][0] == pairs[key][1]
    }
    cells = {
        key: (before, {"variant": after})
        for key, (before, after) in pairs.items()
        if key not in constructed
    }
    deltas = delta_families(cells, settings, min_queries, family_key(family), family)  # type: ignore[arg-type]
    out: dict[Key, dict[str, Any]] = {}
    for key in pairs:
        if key in constructed:
            out[key] = _by_construction(pairs[key][0], settings)
            continue
        (delta,) = deltas[key]
        metric = str(key[0])  # type: ignore[index]
        entry = delta.to_json()
        out[key] = {
            "n": delta.n,
            "original": entry["baseline"],
            "variant": entry["value"],
            "diff": entry["diff"],
            "ci_low": entry["ci_low"],
            "ci_high": entry["ci_high"],
            "ci_level": entry["ci_level"],
            "p_value": entry["p_value"],
            "p_adjusted": entry["p_adjusted"],
            "correction": delta.correction,
            "verdict": verdict(delta, metric),
            "note": delta.note,
            "improved": delta.improved,
            "degraded": delta.degraded,
            "unchanged": delta.unchanged,
        }
    return out


def _by_construction(values: Mapping[str, float], settings: SignificanceSettings) -> dict[str, Any]:
    """A cell that is no test: every variant its original after normalisation, every value
    the same."""
    n = len(values)
    mean = json_number(sum(values.values()) / n) if n else None
    return {
        "n": n,
        "original": mean,
        "variant": mean,
        "diff": 0.0,
        "ci_low": None,
        "ci_high": None,
        "ci_level": None,
        "p_value": None,
        "p_adjusted": None,
        "correction": settings.correction,
        "verdict": NO_EFFECT,
        "note": "every variant is its original once normalised (NFKC, ASCII lowercase) and no "
        "value moved: not tested",
        "improved": 0,
        "degraded": 0,
        "unchanged": n,
    }


def job_robustness(
    variants: Mapping[str, Any],
    originals: Rows,
    perturbations: Sequence[Mapping[str, Any]],
    metrics: Sequence[str],
    k: int,
    stage: str,
    settings: SignificanceSettings,
    min_queries: int,
    family: str,
) -> dict[str, Any]:
    """metrics.json's `robustness` of one job: the variants' scored stage (`variant_rows`), each
    kind's counts, the cells per metric, type and kind, and stable@k (also as `overall` and
    `by_type`, all kinds pooled, where the trend and the gate read a metric's groups)."""
    rows = variants["per_query"]
    pairs = {
        (metric, kind, qtype): values
        for metric in metrics
        for (kind, qtype), values in kind_pairs(originals, rows, metric).items()
    }
    cells: dict[str, dict[str, dict[str, Any]]] = {}
    alike = normalised_alike(rows)
    for (metric, kind, qtype), cell in robustness_cells(
        pairs, settings, min_queries, family, {k for k in pairs if k[1:] in alike}
    ).items():
        cells.setdefault(metric, {}).setdefault(qtype, {})[kind] = cell
    stable: dict[str, dict[str, Any]] = {}
    for (kind, qtype), share in stable_shares(rows, k).items():
        stable.setdefault(qtype, {})[kind] = share
    name = stable_name(k)
    pooled = _pooled(rows, name)
    scored: dict[str, int] = {}
    for row in rows.values():
        scored[str(row[KIND])] = scored.get(str(row[KIND]), 0) + 1
    return {
        "stage": stage,
        "k": k,
        "metrics": list(metrics),
        "kinds": [{**p, "scored": scored.get(str(p[KIND]), 0)} for p in perturbations],
        "types": ordered_types(list({t for by_type in cells.values() for t in by_type})),
        "cells": cells,
        "stable": stable,
        "overall": pooled.get(ALL, {"n": 0, name: None}),
        "by_type": {t: v for t, v in pooled.items() if t != ALL},
        "counts": variants["counts"],
        "per_query": rows,
        "excluded_queries": variants.get("excluded_queries", {}),
    }


def _pooled(rows: Rows, name: str) -> dict[str, dict[str, Any]]:
    """type (and `all`) -> {"n", `name`: mean}: stable@k over every kind's variants."""
    values: dict[str, list[float]] = {}
    for row in rows.values():
        if row.get(name) is not None:
            for qtype in (str(row.get("query_type", "unknown")), ALL):
                values.setdefault(qtype, []).append(float(row[name]))
    return {t: {"n": len(v), name: json_number(sum(v) / len(v))} for t, v in values.items()}


__all__ = [
    "STABLE",
    "job_robustness",
    "kind_pairs",
    "normalised_alike",
    "robustness_cells",
    "variant_rows",
]
