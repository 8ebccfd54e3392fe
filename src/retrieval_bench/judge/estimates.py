"""Metrics and paired differences three ways, when some labels came from a model judge: people's
labels only, people's plus the judge's, and prediction-powered (PPI), each with its interval,
so a verdict that rests on the judge shows it.

The labels are a snapshot with a `judge` field (`python -m run.pool --import` of a judgment
file). Each job's stored rankings are scored three times by the function a job scores with
(`job.runner.score_job`), against:

* `people`: the labels people gave (the judge's labels removed);
* `people + judge`: the snapshot as it is (the judge's labels fill the holes);
* `judge`: the judge's grade wherever it gave one (its labels, and its grades of pairs people
  labelled, which `run.judge --calibrate` makes), people's elsewhere: the prediction f.

PPI (`stats.ppi`, Angelopoulos et al. 2023) takes a query as the unit and estimates the mean
over the same queries as people's estimate beside it (those scored under people's labels: a
query whose labels hold no relevant passage is excluded there, never scored 0). Y is a query's
metric under people's labels; the prediction f its metric under the judge's labels, or, where
the judge's labels leave it nothing relevant (so unscored under them), under people's plus the
judge's (one rule for every query, so f is a fixed prediction as PPI requires). The labelled
queries are those of the population whose every passage in the top K of every compared job
carries a people's label and a judge's grade (so Y has no hole there): their f - Y measures the
judge's error (n of them); on the population's other queries f alone is used (N). Each PPI
figure states its n and N (n + N is the people estimate's n). The estimate is valid when the
labelled queries are a random sample of the population (grade the pool of a random sample of
queries by hand); it is "not estimated" when fewer than `min_queries` (at least 2) queries are
labelled so, or fewer than 2 are not.

Intervals are normal (CLT) for all three, so a change of verdict between them is the labels',
not the method's: the classical mean +/- z sd/sqrt(n) for the first two, PPI's for the third,
every variance with ddof 1 (`stats.ppi`). On a set of one query type, its rows and `all` are
the same estimates: counted once in the correction (as `stats.corrections` counts tests).
Paired differences are per query (the queries both jobs score under those labels); each
estimate's differences are one family, corrected by `compare.correction` over every type x
metric x pair, with each interval at its correction level (`stats.corrections`), so it
excludes 0 exactly where the difference is significant. A difference's verdict is the better
job's label, or `tie`; a cell whose verdict is not the same under every estimate made is
flagged.

`judged` says how much of each ranking rests on the judge: per job and type, the mean share of
the top K labelled at all (judged@K under people + judge), by people, and by the judge.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
from collections.abc import Hashable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from retrieval_bench.config.compare import CompareConfig
from retrieval_bench.data.evalset import load_evalset
from retrieval_bench.errors import BenchError
from retrieval_bench.job.runner import load_configured, load_labelled, score_job
from retrieval_bench.jobdir.files import job_config, read_rankings
from retrieval_bench.jobdir.read import FinishedJob
from retrieval_bench.labels.rescore import read_stored, stored_records
from retrieval_bench.paths import resolve_path
from retrieval_bench.progress import progress
from retrieval_bench.records import EvalQuery
from retrieval_bench.routing.rules import load_rule_set
from retrieval_bench.scoring.registry import is_answer_measure, lower_is_better
from retrieval_bench.stats.corrections import adjust, correction_levels
from retrieval_bench.stats.ppi import Estimate, classical_mean, ppi_mean
from retrieval_bench.stats.settings import SignificanceSettings
from retrieval_bench.stats.verdicts import ALL, ordered_types

PEOPLE, MIXED, PPI = "people", "people+judge", "ppi"
ESTIMATES = (PEOPLE, MIXED, PPI)
TIE = "tie"


def people_labels(query: EvalQuery) -> EvalQuery:
    """`query` with people's labels only."""
    return dataclasses.replace(query, relevance=query.people_relevance, judge={})


def judge_labels(query: EvalQuery) -> EvalQuery:
    """`query` labelled by the judge wherever it graded, by people elsewhere."""
    relevance = {**query.people_relevance, **{p: g.grade for p, g in query.judge.items()}}
    return dataclasses.replace(query, relevance=relevance)


def labels_with_judge(jobs: Sequence[FinishedJob], evalset: Path | None) -> Path | None:
    """The labels to estimate with: `evalset`, else the jobs' own evaluation set when it holds
    judge grades; None when there are none (no estimates to make)."""
    if evalset is not None:
        return evalset
    paths = {
        str((job.config.get("dataset") or {}).get("evalset") or "")
        for job in jobs
        if (job.config.get("dataset") or {}).get("format", "native") == "native"
    }
    if len(paths) != 1 or "" in paths:
        return None
    path = resolve_path(paths.pop())
    if not path.is_file() or '"judge"' not in path.read_text(encoding="utf-8"):
        return None
    return path


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The scorer's warnings (excluded queries, empty rankings) were said when the jobs ran;
    scoring their rankings again three times would only repeat them."""
    logger = logging.getLogger("retrieval_bench")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _scored(job: FinishedJob, labels: Sequence[EvalQuery]) -> dict[str, FinishedJob]:
    """The job scored against each label variant (module docstring)."""
    with _quiet():
        return _scored_variants(job, labels)


def _scored_variants(job: FinishedJob, labels: Sequence[EvalQuery]) -> dict[str, FinishedJob]:
    cfg = job_config(job.path)
    # The evaluation set as configured, without the perturbed variants a robustness job adds
    # (load_labelled adds them again below, as the job did): the labels are the originals'.
    base = load_configured(cfg)
    known = {q.query_id: q.query for q in base.originals}
    asked = [q for q in labels if q.perturbed_from is None]
    changed = [q.query_id for q in asked if known.get(q.query_id) != q.query]
    if changed or len(known) != len(asked):
        raise BenchError(
            f"{job.path}: the labels' queries are not the ones the job ran (e.g. "
            f"{(changed or sorted(set(known) ^ {q.query_id for q in asked}))[:3]})"
        )
    stored = read_stored(job.path, [p.id for p in base.passages])  # once, for every variant
    rule_set = load_rule_set(cfg.router, tuple(cfg.arms), tuple(cfg.combiners))
    out = {}
    for name, relabel in ((PEOPLE, people_labels), (MIXED, None), (PPI, judge_labels)):
        queries = tuple(relabel(q) if relabel else q for q in labels)
        data, judgements, groups = load_labelled(cfg, dataclasses.replace(base, queries=queries))
        records = stored_records(stored, data.queries, job.path)
        metrics = score_job(cfg, data, judgements, groups, records, rule_set)
        out[name] = dataclasses.replace(job, metrics=metrics)
    return out


def _top(job: FinishedJob, stage: str) -> dict[str, list[str]]:
    return {
        r.query.query_id: (r.stages[stage].ids if stage in r.stages else [])[: job.top_k]
        for r in read_rankings(job.path)
    }


def labelled_queries(
    tops: Sequence[Mapping[str, list[str]]], labels: Sequence[EvalQuery]
) -> set[str]:
    """Queries whose every top-K passage of every job has a people's label and a judge's
    grade: PPI's labelled units (module docstring)."""
    out = set()
    for query in labels:
        people = query.people_relevance
        shown = {pid for top in tops for pid in top.get(query.query_id, [])}
        if shown and all(pid in people and pid in query.judge for pid in shown):
            out.add(query.query_id)
    return out


def label_shares(
    job: FinishedJob, top: Mapping[str, list[str]], labels: Mapping[str, EvalQuery]
) -> dict[str, tuple[float, float]]:
    """query id -> (share of its top K labelled by people, share labelled by the judge)."""
    out = {}
    k = float(job.top_k)
    for qid, ids in top.items():
        query = labels.get(qid)
        if query is not None:
            judged = sum(1 for p in ids if p in query.judge and query.judge[p].is_label)
            out[qid] = (sum(1 for p in ids if p in query.people_relevance) / k, judged / k)
    return out


def judge_shares(job: FinishedJob, stage: str) -> dict[str, float]:
    """query id -> share of the job's top K whose label the judge gave, under the labels the
    job is measured with (its evaluation set, or the snapshot it was re-scored against); empty
    when they hold no judge label. What the gate says its checks rest on."""
    path = labels_with_judge([job], None)
    if path is None:
        return {}
    labels = {q.query_id: q for q in load_evalset(path)}
    return {q: judge for q, (_, judge) in label_shares(job, _top(job, stage), labels).items()}


def judged_shares(
    job: FinishedJob, top: Mapping[str, list[str]], labels: Mapping[str, EvalQuery], stage: str
) -> dict[str, dict[str, Any]]:
    """type -> mean share of the top K labelled at all, by people, by the judge (over the
    queries the job's stage scored under people + judge)."""
    rows = job.stage(stage).get("per_query") or {}
    shares = label_shares(job, top, labels)
    sums: dict[str, list[float]] = {}
    for qid, row in rows.items():
        if qid not in shares:
            continue
        by_people, by_judge = shares[qid]
        for t in (str(row.get("query_type", "unknown")), ALL):
            acc = sums.setdefault(t, [0.0, 0.0, 0.0])
            acc[0] += by_people
            acc[1] += by_judge
            acc[2] += 1
    return {
        t: {"judged": (p + j) / n, "by_people": p / n, "by_judge": j / n, "n": int(n)}
        for t, (p, j, n) in sums.items()
    }


def _by_type(values: Mapping[str, float], types: Mapping[str, str]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {ALL: dict(values)}
    for qid, value in values.items():
        out.setdefault(types.get(qid, "unknown"), {})[qid] = value
    return out


def prediction(by_name: Mapping[str, Mapping[str, float]], query: str) -> float:
    """PPI's prediction f of one of people's queries (module docstring): its value under the
    judge's labels, else under people's plus the judge's, else under people's own."""
    for name in (PPI, MIXED):
        value = by_name.get(name, {}).get(query)
        if value is not None:
            return value
    return by_name[PEOPLE][query]


def estimate(
    kind: str,
    by_name: Mapping[str, Mapping[str, float]],
    labelled: set[str],
    min_queries: int,
    confidence: float,
) -> tuple[Estimate | None, str | None]:
    """One estimate of a mean over queries from their values under each label variant
    (`by_name`: estimate name -> {query id: value}): classical over `by_name[kind]`, or (PPI)
    over people's queries, with f (`prediction`) on them and people's values as Y on the
    `labelled` ones (module docstring)."""
    if kind != PPI:
        values = by_name.get(kind, {})
        if len(values) < min_queries:
            return None, f"not estimated: {len(values)} queries (fewer than {min_queries})"
        return classical_mean(list(values.values()), confidence), None
    people = by_name.get(PEOPLE, {})
    units = [q for q in people if q in labelled]
    rest = [q for q in people if q not in labelled]
    if len(units) < max(min_queries, 2):
        return None, (
            f"not estimated: {len(units)} of people's {len(people)} queries have every top-K "
            f"passage labelled by people and graded by the judge (fewer than "
            f"{max(min_queries, 2)})"
        )
    if len(rest) < 2:
        return None, (
            f"not estimated: {len(rest)} of people's {len(people)} queries lack a people's "
            "label or a judge's grade in their top K (use people's estimate)"
        )
    f_rest = [prediction(by_name, q) for q in rest]
    f_units = [prediction(by_name, q) for q in units]
    return ppi_mean(f_rest, f_units, [people[q] for q in units], confidence), None


def judged_metrics(
    per: Mapping[str, Mapping[str, Mapping[str, Mapping[str, Mapping[str, float]]]]],
    labelled: set[str],
    types: Sequence[str],
    cfg: CompareConfig,
    sig: SignificanceSettings,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every metric's three estimates per type (`types`, `all` last) and job, and of every
    pair's difference, each estimate's differences corrected as one family; and the cells
    whose verdict changes between the estimates. `per`: metric -> job label -> estimate name
    -> type -> {query id: value} (`all` included)."""
    metrics: list[dict[str, Any]] = []
    # Each estimate's family: (what makes two rows the same estimate, its cell).
    tests: dict[str, list[tuple[Hashable, dict[str, Any]]]] = {name: [] for name in ESTIMATES}
    for spec, by_label in per.items():
        labels_of = list(by_label)
        entry: dict[str, Any] = {"spec": spec, "types": {}}
        for t in types:
            means = {}
            for label in labels_of:
                means[label] = _three(by_label[label], t, labelled, cfg.min_queries,
                                      cfg.confidence)  # fmt: skip
            diffs = []
            for a, b in itertools.combinations(labels_of, 2):
                cell: dict[str, Any] = {"a": a, "b": b}
                paired = {
                    name: _paired(by_label[a][name].get(t, {}), by_label[b][name].get(t, {}))
                    for name in ESTIMATES
                }
                for name in ESTIMATES:
                    found, note = estimate(name, paired, labelled, cfg.min_queries,
                                           cfg.confidence)  # fmt: skip
                    cell[name] = {"estimate": found, "note": note}
                    if found is not None:
                        # A type's row and `all` on a set of one type: the same queries.
                        same = (spec, a, b, tuple(sorted(paired[PEOPLE])),
                                tuple(sorted(paired[name])))  # fmt: skip
                        tests[name].append((same, cell[name]))
                diffs.append(cell)
            entry["types"][t] = {"means": means, "differences": diffs}
        entry["lower_is_better"] = lower_is_better(spec)
        metrics.append(entry)
    for family in tests.values():
        _decide(family, sig)
    changed = []
    for entry in metrics:
        for t, cell in entry["types"].items():
            for diff in cell["differences"]:
                for name in ESTIMATES:
                    result = diff[name]
                    found = result.pop("estimate")
                    if found is not None:
                        result.update(found.to_json())
                        result["verdict"] = _verdict(result, diff, entry["lower_is_better"])
                made = {n: diff[n]["verdict"] for n in ESTIMATES if "verdict" in diff[n]}
                diff["changed"] = len(set(made.values())) > 1
                if diff["changed"]:
                    changed.append(
                        {"metric": entry["spec"], "type": t, "a": diff["a"], "b": diff["b"]}
                        | {"verdicts": made}
                    )
    return metrics, changed


def estimate_judged(
    jobs: Sequence[FinishedJob],
    cfg: CompareConfig,
    sig: SignificanceSettings,
    evalset: Path | None = None,
) -> dict[str, Any] | None:
    """The three estimates of one dataset's jobs (module docstring), or None when the labels
    hold no judge grade."""
    path = labels_with_judge(jobs, evalset)
    if path is None:
        return None
    labels = load_evalset(path)
    if not any(q.judge for q in labels):
        return None
    by_id = {q.query_id: q for q in labels}
    stage = cfg.stage
    with progress("scoring with and without the judge's labels", len(jobs), "job") as bar:
        scored = {}
        for job in jobs:
            scored[job.label] = _scored(job, labels)
            bar.update(1)
    tops = {job.label: _top(job, stage) for job in jobs}
    labelled = labelled_queries(list(tops.values()), labels)
    specs = [s for s in cfg.metrics if not is_answer_measure(s)]
    labels_of = [job.label for job in jobs]
    per = {
        spec: {
            label: {
                name: _by_type(
                    scored[label][name].per_query(stage, spec),
                    scored[label][name].query_types(stage),
                )
                for name in ESTIMATES
            }
            for label in labels_of
        }
        for spec in specs
    }
    types = ordered_types(sorted({q.query_type for q in labels}))
    metrics, changed = judged_metrics(per, labelled, types, cfg, sig)
    judged_people = {label: scored[label][MIXED] for label in labels_of}
    return {
        "labels": str(path),
        "judge_sources": sorted({g.source for q in labels for g in q.judge.values()}),
        "stage": stage,
        "labelled_queries": len(labelled),
        "queries": len(labels),
        "metrics": metrics,
        "changed": changed,
        "judged": {
            label: judged_shares(judged_people[label], tops[label], by_id, stage)
            for label in labels_of
        },
    }


def _paired(a: Mapping[str, float], b: Mapping[str, float]) -> dict[str, float]:
    return {q: a[q] - b[q] for q in a if q in b}


def _three(
    per: Mapping[str, Mapping[str, Mapping[str, float]]],
    t: str,
    labelled: set[str],
    min_queries: int,
    confidence: float,
) -> dict[str, Any]:
    """One job's mean in type `t` under each estimate."""
    by_name = {name: per[name].get(t, {}) for name in ESTIMATES}
    out = {}
    for name in ESTIMATES:
        found, note = estimate(name, by_name, labelled, min_queries, confidence)
        out[name] = found.to_json() if found is not None else {"note": note}
    return out


def _decide(family: list[tuple[Hashable, dict[str, Any]]], sig: SignificanceSettings) -> None:
    """Correct the family's p-values (rows that are the same estimate counted once) and draw
    each interval at its correction level."""
    if not family:
        return
    distinct: dict[Hashable, float] = {}
    for same, cell in family:
        distinct.setdefault(same, cell["estimate"].p_value)
    p_values = list(distinct.values())
    adjusted = dict(zip(distinct, adjust(p_values, sig.correction), strict=True))
    levels = dict(zip(distinct, correction_levels(p_values, sig), strict=True))
    for same, cell in family:
        cell["estimate"] = cell["estimate"].at(levels[same])
        cell["p_adjusted"] = adjusted[same]
        cell["significant"] = adjusted[same] < sig.alpha


def _verdict(result: Mapping[str, Any], diff: Mapping[str, Any], lower: bool) -> str:
    if not result["significant"]:
        return TIE
    a_better = (result["mean"] > 0) != lower
    return str(diff["a"] if a_better else diff["b"])
