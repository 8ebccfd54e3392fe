"""Bad cases: per query, where each configuration (and each of its arms) put every expected
passage and entity, and what none of them found.

Read from each job's `rankings.jsonl` (every stage's ids), `qrels.trec` (the labels scored
against) and `metrics.json` (the per-query values), through `jobdir.files`. Expected entities
come from the evaluation set named in the job's config, and a passage carries an entity when its
`meta.entities` names it (or, without that field, when its title or text contains it); both are
optional, so folders copied away from their dataset still give the passage view.

A query *flips* when one configuration finds a relevant passage in its top K and another finds
none (hit@K differs); those come first in each type, then queries whose primary metric differs,
then the rest. Queries every configuration answers fully are counted, not listed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from retrieval_bench.errors import BenchError
from retrieval_bench.jobdir import names
from retrieval_bench.jobdir.files import read_job_qrels, read_rankings
from retrieval_bench.jobdir.read import FinishedJob
from retrieval_bench.records import QueryRecord
from retrieval_bench.scoring.stage_loss import split_pool

log = logging.getLogger(__name__)

FLIP, DIFFERS, SAME = "flip", "differs", "same"
_ORDER = {FLIP: 0, DIFFERS: 1, SAME: 2}


def _rankings(job: FinishedJob) -> dict[str, QueryRecord]:
    if not (job.path / names.RANKINGS).is_file():
        log.warning("%s: no %s; its ranks are left out of the bad cases", job.path, names.RANKINGS)
        return {}
    return {record.query.query_id: record for record in read_rankings(job.path)}


def _entity_view(job: FinishedJob) -> tuple[dict[str, tuple[str, ...]], dict[str, set[str]]]:
    """(query id -> expected entities, passage id -> entities it carries), or empty maps."""
    from retrieval_bench.data.evalset import load_evalset
    from retrieval_bench.data.passages import load_passages
    from retrieval_bench.job.runner import resolve_path

    dataset = job.config.get("dataset") or {}
    if dataset.get("format", "native") != "native":
        return {}, {}
    try:
        queries = load_evalset(resolve_path(str(dataset.get("evalset", ""))))
    except (OSError, BenchError, ValueError) as exc:
        log.info("bad cases without entities: evaluation set unreadable (%s)", exc)
        return {}, {}
    expected = {q.query_id: q.expected_entities for q in queries if q.expected_entities}
    if not expected:
        return {}, {}
    names = {e for ents in expected.values() for e in ents}
    try:
        passages = load_passages(resolve_path(str(dataset.get("corpus", ""))) / "passages.jsonl")
    except (OSError, BenchError, ValueError) as exc:
        log.info("bad cases without entities: corpus unreadable (%s)", exc)
        return {}, {}
    carries: dict[str, set[str]] = {}
    for p in passages:
        tagged = p.meta.get("entities")
        if tagged:
            carries[p.id] = {str(e) for e in tagged} & names
        else:
            text = f"{p.title}\n{p.text}"
            carries[p.id] = {n for n in names if n in text}
    return expected, carries


def _rank(ids: Sequence[str], wanted: str) -> int | None:
    try:
        return ids.index(wanted) + 1
    except ValueError:
        return None


def _entity_rank(ids: Sequence[str], entity: str, carries: Mapping[str, set[str]]) -> int | None:
    for i, pid in enumerate(ids, start=1):
        if entity in carries.get(pid, ()):
            return i
    return None


def drilldown(
    jobs: Sequence[FinishedJob], stage: str, primary: str, hit: str = "hit@K"
) -> dict[str, Any]:
    """The bad-case records of a set of jobs on one dataset (layout: see `to_markdown`)."""
    labels = [j.label for j in jobs]
    rankings = {j.label: _rankings(j) for j in jobs}
    primary_values = {j.label: j.per_query(stage, primary) for j in jobs}
    hit_values = {j.label: j.per_query(stage, hit) for j in jobs}
    qrels: dict[str, dict[str, int]] = {}
    types: dict[str, str] = {}
    for job in jobs:
        for qid, labels_of in (read_job_qrels(job.path) or {}).items():
            qrels.setdefault(qid, labels_of)
        for qid, qtype in job.query_types(stage).items():
            types.setdefault(qid, qtype)
    expected_entities, carries = _entity_view(jobs[0]) if jobs else ({}, {})

    queries: list[dict[str, Any]] = []
    perfect = 0
    for qid in sorted(types):
        relevant = [d for d, g in sorted(qrels.get(qid, {}).items()) if g > 0]
        items: list[dict[str, Any]] = [{"kind": "passage", "id": d} for d in relevant]
        items += [{"kind": "entity", "id": e} for e in expected_entities.get(qid, ())]
        text = ""
        for item in items:
            item["ranks"] = {}
            for label in labels:
                record = rankings[label].get(qid)
                if record is None:
                    continue
                text = text or record.query.query
                ranks = {}
                for name, st in record.stages.items():
                    ids = st.ids
                    ranks[name] = (
                        _rank(ids, item["id"])
                        if item["kind"] == "passage"
                        else _entity_rank(ids, item["id"], carries)
                    )
                item["ranks"][label] = ranks
            item["found_by"] = [
                label for label, r in item["ranks"].items() if r.get(stage) is not None
            ]
        values = {label: primary_values[label].get(qid) for label in labels}
        hits = {label: hit_values[label].get(qid) for label in labels}
        present = [v for v in values.values() if v is not None]
        hit_present = {h for h in hits.values() if h is not None}
        if len(hit_present) > 1:
            kind = FLIP
        elif len(set(present)) > 1:
            kind = DIFFERS
        else:
            kind = SAME
        missed = [it["id"] for it in items if not it["found_by"]]
        all_found = all(len(it["found_by"]) == len(labels) for it in items)
        if kind == SAME and all_found:
            perfect += 1
            continue
        queries.append(
            {
                "query_id": qid,
                "query": text,
                "query_type": types[qid],
                "kind": kind,
                "spread": (max(present) - min(present)) if present else 0.0,
                primary: values,
                hit: hits,
                "expected": items,
                "missed_by_all": missed,
            }
        )
    queries.sort(key=lambda q: (q["query_type"], _ORDER[q["kind"]], -q["spread"], q["query_id"]))
    return {
        "stage": stage,
        "primary": primary,
        "hit": hit,
        "configurations": labels,
        "queries": queries,
        "fully_found": perfect,
    }


def _cell(ranks: Mapping[str, int | None] | None, stage: str) -> str:
    """One configuration's cell: the item's rank in `stage`; then in brackets its rank in each
    arm's pool (which arm retrieved it: with several arms, or when `stage` lacks it), and, when
    `stage` lacks it, its rank in each stage after the pools and before `stage` that still held
    it (`fused 7, rerank 12`: where it fell out). Arms are told from later stages by the
    pipeline's recorded order, the rule `stage_loss` uses (`split_pool`), so a reranker or the
    context is never shown as an arm; stages after `stage` (the context after `final`) say
    nothing about `stage`'s rank and are left out."""
    if ranks is None:
        return "n/a"
    found = ranks.get(stage)
    text = "–" if found is None else str(found)
    pools, later = split_pool(list(ranks))
    arms = [(name, ranks[name]) for name in pools if name != stage]
    parts = []
    if len(arms) > 1 or (arms and found is None and arms[0][1] is not None):
        parts.append(", ".join(f"{n} {'–' if r is None else r}" for n, r in arms))
    if found is None and stage in later:
        held = [(n, ranks[n]) for n in later[: later.index(stage)] if ranks[n] is not None]
        if held:
            parts.append(", ".join(f"{n} {r}" for n, r in held))
    return text + (f" ({'; '.join(parts)})" if parts else "")


def to_markdown(report: Mapping[str, Any], title: str) -> str:
    """badcases.md: per type, flips first; a cell is the rank in the compared stage's list
    (`_cell` says what its brackets hold)."""
    labels: list[str] = list(report["configurations"])
    stage = report["stage"]
    primary, hit = report["primary"], report["hit"]
    lines = [
        f"# Bad cases: {title}",
        "",
        f"Rank of each expected passage / entity in each configuration's `{stage}` ranking "
        "(in brackets: its rank in each arm's pool, `–` = not retrieved there; where the "
        f"`{stage}` ranking lacks it, also its rank in the stages before `{stage}` that still "
        "held it, e.g. `rerank 12`). `flip`: one configuration "
        f"finds a relevant passage in its top K ({hit}) and another finds none. "
        f"{report['fully_found']} queries found in full by every configuration are not listed.",
        "",
    ]
    current = None
    for q in report["queries"]:
        if q["query_type"] != current:
            current = q["query_type"]
            kinds = [x["kind"] for x in report["queries"] if x["query_type"] == current]
            lines += [
                f"## {current}",
                "",
                f"{kinds.count(FLIP)} flips, {kinds.count(DIFFERS)} differ, "
                f"{kinds.count(SAME)} missed alike",
                "",
            ]
        values = ", ".join(
            f"{label} {'n/a' if v is None else f'{v:.3f}'}" for label, v in q[primary].items()
        )
        lines += [
            f"### {q['query_id']} [{q['kind']}] {q['query']}",
            "",
            f"{primary}: {values}",
            "",
            "| expected | " + " | ".join(labels) + " |",
            "|---|" + "---|" * len(labels),
        ]
        for item in q["expected"]:
            name = item["id"] if item["kind"] == "passage" else f"entity {item['id']}"
            cells = [_cell(item["ranks"].get(label), stage) for label in labels]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        if q["missed_by_all"]:
            lines += ["", "missed by all: " + ", ".join(q["missed_by_all"])]
        lines.append("")
    return "\n".join(lines)
