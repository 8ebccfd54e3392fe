"""The data the HTML report (`reports.html`) embeds: one job's or one sweep's records, compacted.

Read from what a job wrote (metrics.json, rankings.jsonl, qrels.trec, plots/) and the passage
texts of its corpus; nothing here runs or scores anything, so every number shown in the HTML is
one of metrics.json's, and every ranking one of rankings.jsonl's.

Layout (columnar, so 3 jobs x 1,000 queries stay a few MB):

* `passages`: `ids`, and `text` (one entry per passage id referenced by any ranking or label,
  stored once however many rankings hold it). Texts are cut to fit `text_budget` bytes in all
  (the same cap for every text, the largest that fits, at most `max_chars`); `full_chars` keeps
  each cut text's true length, and `meta.text_note` says how many were cut and where.
* `queries`: `ids`, `text`, `type`, `labels` ([[passage index, grade], ...] per query, from
  qrels.trec) and `excluded` (the reason a query was not scored, or null).
* `systems`: per job: its label, folder, top_k, the stage names in pipeline order as
  rankings.jsonl recorded them (never a fixed list), per stage each query's ranking as passage
  indices and scores (4 significant digits), the per-query values of the core metrics, the
  overall and per-type aggregates, the route per query, where labelled passages were lost
  (`loss`, below), and the plots as base64 PNG.
* `loss` (per system): metrics.json's `stage_loss` as recorded (`checkpoints`, `overall`,
  `by_type`), with its `per_query` as a column over `queries.ids`: null for a query the job did
  not score, else [[passage index, checkpoint], ...] for each labelled passage it lost (the
  others were kept). The explorer shows these and decides nothing itself, so the page and
  metrics.json agree. A job folder written before `stage_loss` existed gets it computed here
  by the same function (`scoring.stage_loss`) from its rankings and labels.
* `comparison`: a sweep's comparison record (verdicts, tests, family) for one dataset, or null.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrieval_bench.records import PERTURBATION, PERTURBED_FROM
from retrieval_bench.reports.robustness import job_view
from retrieval_bench.scoring.labels import Judgements
from retrieval_bench.scoring.robustness import stable_name
from retrieval_bench.scoring.stage_loss import stage_loss

# Total UTF-8 bytes of passage text one HTML file may embed, and the cap on any one text.
TEXT_BUDGET_BYTES = 2_000_000
MAX_TEXT_CHARS = 2_000
# The share of the text budget labelled and top-K passages may take before the others.
FIRST_SHARE = 0.75
# Ids shown per stage and query; labelled passages ranked deeper are kept with their rank, so a
# job with pools of 1,000 still fits the budget and still says where each labelled passage was.
MAX_DEPTH = 100
TRUNCATION_MARK = "…"
# The metrics every table and query row shows, at the job's top_k; others stay in metrics.json.
CORE_METRICS = ("recall", "hit", "mrr", "ndcg", "map")
# The job folder's figures (`reports.plots` writes them there).
PLOT_DIR = "plots"


@dataclass
class SystemRun:
    """One job as the explorer shows it."""

    label: str
    path: str
    top_k: int
    metrics: Mapping[str, Any]
    rankings: Sequence[Mapping[str, Any]]
    plots: Mapping[str, bytes] = field(default_factory=dict)


def read_rankings(path: Path) -> list[dict[str, Any]]:
    """rankings.jsonl's records, in file order (an absent file: none)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def read_plots(job_dir: Path) -> dict[str, bytes]:
    """Every PNG under `<job>/plots/`, by its path relative to the job folder."""
    folder = job_dir / PLOT_DIR
    if not folder.is_dir():
        return {}
    return {f"{PLOT_DIR}/{p.name}": p.read_bytes() for p in sorted(folder.glob("*.png"))}


def _round(value: Any) -> Any:
    if isinstance(value, float):
        return float(f"{value:.4g}") if value == value else None
    return value


def _text_cap(lengths: Sequence[int], budget: int, max_chars: int) -> int:
    """The largest per-text cap (in characters, <= max_chars) whose total fits `budget`.
    `lengths` are the texts' lengths; `budget` is in the same unit."""
    if sum(min(n, max_chars) for n in lengths) <= budget:
        return max_chars
    low, high = 0, max_chars
    while low < high:
        mid = (low + high + 1) // 2
        if sum(min(n, mid) for n in lengths) <= budget:
            low = mid
        else:
            high = mid - 1
    return low


TextOf = Callable[[str], str | None]


def passage_table(
    ids: Sequence[str],
    text_of: TextOf,
    budget: int = TEXT_BUDGET_BYTES,
    max_chars: int = MAX_TEXT_CHARS,
    first: Collection[str] = (),
) -> tuple[dict[str, Any], str]:
    """(`passages` record, the note saying what was cut). The passages in `first` (the ones a
    reader opens most: labelled, or in some stage's top K) get up to FIRST_SHARE of the budget
    first, the rest share what is left; within each group every text gets the same cap, the largest
    that fits. A text longer than its cap keeps its first `cap` characters and
    `TRUNCATION_MARK`; `full_chars` holds its true length, so the page says "showing 300 of
    5,120 characters". A passage whose text is not at hand (a folder compared away from its
    corpus) has null text."""
    raw = [text_of(pid) for pid in ids]
    # Budget in bytes; a cap in characters: scale each text's length by its bytes per char.
    sizes = [len(t.encode("utf-8")) if t else 0 for t in raw]
    chars = [len(t) if t else 0 for t in raw]
    per_char = max((s / c for s, c in zip(sizes, chars, strict=True) if c), default=1.0)
    # The budget holds the marks too: each text may end with one.
    marks = len(ids) * len(TRUNCATION_MARK.encode("utf-8"))
    units = int(max(0, budget - marks) / per_char)
    wanted = set(first)
    groups = [
        [i for i, pid in enumerate(ids) if pid in wanted],
        [i for i, pid in enumerate(ids) if pid not in wanted],
    ]
    caps: list[int] = []
    for g, group in enumerate(groups):
        lengths = [chars[i] for i in group]
        # The first group takes at most FIRST_SHARE when others wait, so they keep some text.
        share = int(units * FIRST_SHARE) if g == 0 and groups[1] else units
        caps.append(_text_cap(lengths, share, max_chars))
        units = max(0, units - sum(min(n, caps[-1]) for n in lengths))
    cap_of = {i: caps[g] for g, group in enumerate(groups) for i in group}
    out_text: list[str | None] = []
    full: list[int] = []
    cut = [0, 0]
    for i, text in enumerate(raw):
        if text is not None and len(text) > cap_of[i]:
            out_text.append(text[: cap_of[i]] + TRUNCATION_MARK)
            full.append(len(text))
            cut[0 if ids[i] in wanted else 1] += 1
        else:
            out_text.append(text)
            full.append(0)
    missing = sum(t is None for t in raw)
    note = ""
    if sum(cut):
        parts = [
            f"{n} of {len(group)} {what} to their first {cap} characters"
            for n, group, cap, what in zip(
                cut,
                groups,
                caps,
                ("labelled or top-K passages", "other passages"),
                strict=True,
            )
            if n
        ]
        note = (
            f"Passage texts cut (marked {TRUNCATION_MARK}) so this file stays within "
            f"{budget / 1e6:g} MB of text: {'; '.join(parts)}. The full texts are in the corpus."
        )
    if missing:
        note += f" {missing} passage texts were not at hand (corpus not readable from here)."
    return {"ids": list(ids), "text": out_text, "full_chars": full}, note.strip()


def _stage_per_query(
    stage: Mapping[str, Any],
    names: Sequence[str],
    qids: Sequence[str],
    variants: Mapping[str, Any] | None = None,
) -> Any:
    """Each metric's column over `qids`; `variants`: the perturbed variants' rows scored at this
    stage (metrics.json `robustness.per_query`), shown beside the originals'."""
    rows = {**(stage.get("per_query") or {}), **(variants or {})}
    return {
        name: [_round((rows.get(q) or {}).get(name)) for q in qids]
        for name in names
        if any(name in row for row in rows.values())
    }


def _aggregates(stage: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    def pick(group: Mapping[str, Any]) -> dict[str, Any]:
        out = {name: _round(group.get(name)) for name in names if name in group}
        out["n"] = group.get("n")
        return out

    by_type = {t: pick(g) for t, g in (stage.get("by_type") or {}).items()}
    return {"overall": pick(stage.get("overall") or {}), "by_type": by_type}


def _loss(
    system: SystemRun,
    qrels: Mapping[str, Mapping[str, int]],
    qids: Sequence[str],
    index: Callable[[str], int],
) -> dict[str, Any]:
    """The system's `loss` record (layout: the module's docstring)."""
    loss = system.metrics.get("stage_loss")
    if loss is None:
        recorded = {
            str(r["query_id"]): {n: s["ids"] for n, s in (r.get("stages") or {}).items()}
            for r in system.rankings
        }
        types = {str(r["query_id"]): str(r.get("query_type", "unknown")) for r in system.rankings}
        labels = {q: dict(qrels[q]) for q in recorded if q in qrels}
        loss = stage_loss(recorded, Judgements(qrels=labels, query_types=types))
    # The queries stage_loss counted: the scored ones (those with labels) this job ranked.
    ranked = {str(r["query_id"]) for r in system.rankings}
    lost = loss.get("per_query") or {}
    column = [
        [[index(pid), stage] for stage, pids in (lost.get(q) or {}).items() for pid in pids]
        if q in qrels and q in ranked
        else None
        for q in qids
    ]
    return {
        "checkpoints": list(loss["checkpoints"]),
        "overall": loss["overall"],
        "by_type": loss["by_type"],
        "per_query": column,
    }


def _variants_beside_originals(queries: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The query ids in recorded order, each perturbed variant right after its original."""
    variants: dict[str, list[str]] = {}
    for qid, record in queries.items():
        source = record.get(PERTURBED_FROM)
        if source in queries:
            variants.setdefault(str(source), []).append(qid)
    ordered: list[str] = []
    for qid, record in queries.items():
        if record.get(PERTURBED_FROM) not in queries:
            ordered += [qid, *variants.get(qid, [])]
    return ordered


def _robustness_view(
    systems: Sequence[SystemRun],
    comparison: Mapping[str, Any] | None,
    settings: Mapping[str, Any] | None,
) -> Mapping[str, Any] | None:
    """The robustness heatmap's data: a sweep's comparison view, or one job's own."""
    if comparison is not None:
        return comparison.get("robustness")
    if len(systems) == 1 and systems[0].metrics.get("robustness"):
        return job_view(systems[0].metrics["robustness"], systems[0].label, settings or {})
    return None


def explorer_payload(
    title: str,
    kind: str,
    systems: Sequence[SystemRun],
    qrels: Mapping[str, Mapping[str, int]],
    text_of: TextOf,
    comparison: Mapping[str, Any] | None = None,
    settings: Mapping[str, Any] | None = None,
    left_out: Iterable[tuple[str, str]] = (),
    text_budget: int = TEXT_BUDGET_BYTES,
    max_chars: int = MAX_TEXT_CHARS,
    max_depth: int = MAX_DEPTH,
) -> dict[str, Any]:
    """The JSON the HTML embeds (layout: the module's docstring). `kind` is `job` or `sweep`;
    `left_out` names the job folders a sweep could not show, with why. Each stage's ranking is
    cut to its first `max_depth` ids (`returned` keeps its length); a labelled passage ranked
    below the cut is kept in `deep` as [rank, passage index, score]."""
    queries: dict[str, dict[str, Any]] = {}
    for system in systems:
        for record in system.rankings:
            queries.setdefault(str(record["query_id"]), dict(record))
    qids = _variants_beside_originals(queries)
    positions: dict[str, int] = {}

    def index(pid: str) -> int:
        if pid not in positions:
            positions[pid] = len(positions)
        return positions[pid]

    labels = [
        [[index(pid), int(grade)] for pid, grade in sorted((qrels.get(q) or {}).items())]
        for q in qids
    ]
    excluded: dict[str, str] = {}
    cut_stages: list[str] = []
    out_systems = []
    for system in systems:
        by_query = {str(r["query_id"]): r for r in system.rankings}
        stage_names: dict[str, None] = {}
        for record in system.rankings:
            for name in record.get("stages") or {}:
                stage_names.setdefault(name, None)
        stages = list(stage_names)
        names = [f"{m}@{system.top_k}" for m in CORE_METRICS]
        recorded = system.metrics.get("stages") or {}
        robustness = system.metrics.get("robustness") or {}
        for stage in [*recorded.values(), robustness]:
            for qid, reason in (stage.get("excluded_queries") or {}).items():
                excluded.setdefault(str(qid), str(reason))
        rankings: dict[str, list[Any]] = {}
        scores: dict[str, list[Any]] = {}
        returned: dict[str, list[int | None]] = {}
        deep: dict[str, list[Any]] = {}
        for name in stages:
            ids_col: list[Any] = []
            score_col: list[Any] = []
            deep_col: list[Any] = []
            length_col: list[int | None] = []
            for q in qids:
                stage = ((by_query.get(q) or {}).get("stages") or {}).get(name)
                if stage is None:
                    for col in (ids_col, score_col, deep_col, length_col):
                        col.append(None)
                    continue
                ids, stage_scores = stage["ids"], stage["scores"]
                ids_col.append([index(pid) for pid in ids[:max_depth]])
                score_col.append([_round(float(x)) for x in stage_scores[:max_depth]])
                length_col.append(len(ids))
                labelled = qrels.get(q) or {}
                below = [
                    [rank, index(pid), _round(float(stage_scores[rank - 1]))]
                    for rank, pid in enumerate(ids[max_depth:], start=max_depth + 1)
                    if pid in labelled
                ]
                deep_col.append(below or None)
            rankings[name], scores[name], returned[name] = ids_col, score_col, length_col
            if any(d is not None for d in deep_col):
                deep[name] = deep_col
            if any(n is not None and n > max_depth for n in length_col) and name not in cut_stages:
                cut_stages.append(name)
        out_systems.append(
            {
                "label": system.label,
                "path": system.path,
                "top_k": system.top_k,
                "stages": stages,
                "loss": _loss(system, qrels, qids, index),
                "metric_names": names,
                "route": [(by_query.get(q) or {}).get("route") for q in qids],
                "rankings": rankings,
                "scores": scores,
                "returned": returned,
                "deep": deep,
                "values": {
                    name: _stage_per_query(
                        recorded[name],
                        [*names, *([stable_name(system.top_k)] if robustness else [])],
                        qids,
                        robustness.get("per_query") if robustness.get("stage") == name else None,
                    )
                    for name in stages
                    if name in recorded
                },
                # A router's baselines (each retriever alone on the same queries) beside its
                # stages, as `baselines/<name>`, the way results.csv names them.
                "aggregates": {
                    **{name: _aggregates(s, names) for name, s in recorded.items()},
                    **{
                        f"baselines/{name}": _aggregates(s, names)
                        for name, s in (system.metrics.get("baselines") or {}).items()
                    },
                },
                "counts": {name: s.get("counts") or {} for name, s in recorded.items()},
                "plots": {
                    name: base64.b64encode(png).decode("ascii")
                    for name, png in system.plots.items()
                },
            }
        )
    first = {pid for q in qids for pid in qrels.get(q) or {}}
    for system in systems:
        for record in system.rankings:
            for stage in (record.get("stages") or {}).values():
                first.update(stage["ids"][: system.top_k])
    passages, text_note = passage_table(list(positions), text_of, text_budget, max_chars, first)
    return {
        "meta": {
            "title": title,
            "kind": kind,
            "left_out": [{"path": str(p), "reason": r} for p, r in left_out],
            "text_note": text_note,
            "depth_note": (
                f"Rankings of stage(s) {', '.join(cut_stages)} are shown to depth {max_depth}; "
                "labelled passages ranked deeper are listed below the cut with their rank."
                if cut_stages
                else ""
            ),
        },
        "queries": {
            "ids": qids,
            "text": [queries[q].get("query", "") for q in qids],
            "type": [str(queries[q].get("query_type", "unknown")) for q in qids],
            "labels": labels,
            "excluded": [excluded.get(q) for q in qids],
            # A perturbed variant: its original's id and what changed (null for an original).
            "variant_of": [queries[q].get(PERTURBED_FROM) for q in qids],
            "perturbation": [queries[q].get(PERTURBATION) for q in qids],
        },
        "robustness": _robustness_view(systems, comparison, settings),
        "passages": passages,
        "systems": out_systems,
        "comparison": dict(comparison) if comparison is not None else None,
        "settings": dict(settings) if settings is not None else None,
    }
