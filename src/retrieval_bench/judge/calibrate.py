"""How far the judge agrees with people, measured on pairs people already labelled
(`python -m run.judge --calibrate`).

The sample: every (query, passage) label people gave in the evaluation set (relevant ids, and
the grade-0 judgements imported from filled pools; not the judge's own labels, not
`unreviewed` queries), or `sample` of them drawn at random (seeded). The judge grades each, as
it would a pool pair, through the same cache. Reported (`stats.agreement`), overall and per
query type:

* Cohen's kappa of relevant (grade > 0) against not, people vs the judge's grade on the
  evaluation set's scale (what an import would make the label);
* kappa weighted over the scale's grades (quadratic weights; on a 0,1 scale it equals the
  binary kappa);
* the confusion matrix, people's grade x the judge's own grade (0-3 for a chat model, so the
  relevance cut `--relevant-from` can be chosen from it), and for a chat model on a 0,1 scale
  the binary kappa at each possible cut;
* "not estimated" for a group of fewer than `min_pairs` pairs (30), or where a rater gave one
  grade only (a set labelled with relevant ids only: kappa cannot tell agreement from chance).

A cross-encoder or a similarity judge has no grades of its own (a score: `judge.base.ScoreJudge`):
without `--thresholds`, its thresholds are chosen on
half of the sampled queries (`split`, seeded; a query's pairs stay in one half) to maximise the
kappa there (binary on a 0,1 scale, weighted otherwise), and the agreement is reported on the
other half only, so the thresholds are never judged on the pairs they were fitted to.

Written: `calibration.jsonl` (the judge's grades of the sample, importable like a judgment
file: the snapshot then keeps them beside people's labels, which the prediction-powered
estimates need), `calibration.json` and `calibration.md`.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from retrieval_bench.data.evalset import load_evalset
from retrieval_bench.data.jsonl import file_sha256
from retrieval_bench.data.passages import load_passages
from retrieval_bench.errors import BenchError, ConfigError
from retrieval_bench.io.atomic import atomic_write_json, atomic_write_text
from retrieval_bench.io.strict_json import jsonl_text
from retrieval_bench.judge.base import Judge, Pair, ScoreJudge
from retrieval_bench.judge.cache import JudgeCache
from retrieval_bench.judge.files import CALIBRATION_JSON, CALIBRATION_JUDGMENTS, CALIBRATION_MD
from retrieval_bench.judge.judging import Tally, judge_pairs, judgment_record
from retrieval_bench.judge.prompt import JUDGE_SCALE
from retrieval_bench.records import EvalQuery, passage_text
from retrieval_bench.stats.agreement import Agreement, agreement, cohen_kappa, kappa_note

MIN_PAIRS = 30
WEIGHTS = "quadratic"
ALL = "all"


@dataclass(frozen=True)
class LabelledPair:
    pair: Pair
    query: EvalQuery
    people_grade: int


def labelled_pairs(queries: Sequence[EvalQuery], texts: Mapping[str, str]) -> list[LabelledPair]:
    """Every label people gave to a passage of the corpus, in evaluation-set order."""
    out = []
    for query in queries:
        if query.label_status == "unreviewed":
            continue
        for pid, grade in query.people_relevance.items():
            if pid in texts:
                pair = Pair(query.query_id, pid, query.query, texts[pid])
                out.append(LabelledPair(pair, query, grade))
    return out


def draw(pairs: Sequence[LabelledPair], size: int | None, seed: int) -> list[LabelledPair]:
    """`size` of `pairs` at random (seeded), kept in their order; all when `size` is None."""
    if size is None or size >= len(pairs):
        return list(pairs)
    if size <= 0:
        raise ConfigError("--sample", f"must be positive (or 'all'), got {size}")
    chosen = sorted(random.Random(seed).sample(range(len(pairs)), size))
    return [pairs[i] for i in chosen]


def split(pairs: Sequence[LabelledPair], seed: int) -> tuple[list[int], list[int]]:
    """Indices of the fitting half and the evaluation half, by query (seeded shuffle of the
    query ids; the first half of them fits)."""
    queries = sorted({p.pair.query_id for p in pairs})
    random.Random(seed).shuffle(queries)
    fitting = set(queries[: len(queries) // 2])
    fit = [i for i, p in enumerate(pairs) if p.pair.query_id in fitting]
    held = [i for i, p in enumerate(pairs) if p.pair.query_id not in fitting]
    return fit, held


def _grades(scores: np.ndarray, thresholds: Sequence[float]) -> list[int]:
    return [int(g) for g in (scores[:, None] >= np.asarray(thresholds)[None, :]).sum(axis=1)]


def _fit_kappa(
    people: Sequence[int], scores: np.ndarray, thresholds: Sequence[float], scale: Sequence[int]
) -> float:
    grades = _grades(scores, thresholds)
    if len(scale) == 2:
        value = cohen_kappa(people, grades, scale)
    else:
        value = cohen_kappa(people, grades, scale, WEIGHTS)
    return -np.inf if value is None else value


def fit_thresholds(
    people: Sequence[int], scores: Sequence[float], scale: Sequence[int]
) -> list[float]:
    """Thresholds t_1 <= ... <= t_M on the scores that maximise kappa with people's grades
    (binary kappa on a 0,1 scale: exhaustive over the cut points; weighted kappa otherwise:
    coordinate ascent from the cuts that match people's grade shares). BenchError when people
    gave one grade only (no threshold can be told from another)."""
    reason = kappa_note(list(people), [0, 1])
    if reason:
        raise BenchError(
            f"cannot choose the judge's score thresholds: {reason}. Import judged "
            "non-relevant passages first (a filled pool), or give --thresholds"
        )
    s = np.asarray(scores, dtype=np.float64)
    distinct = np.unique(s)
    candidates = np.concatenate(
        ([distinct[0] - 1.0], (distinct[:-1] + distinct[1:]) / 2, [distinct[-1] + 1.0])
    )
    m = len(scale) - 1
    shares = np.cumsum([np.mean(np.asarray(people) == g) for g in scale])[:-1]
    current = [float(np.quantile(s, share)) for share in shares]
    current = [float(candidates[np.abs(candidates - t).argmin()]) for t in current]
    best = _fit_kappa(people, s, current, scale)
    for _ in range(20):
        improved = False
        for j in range(m):
            low = current[j - 1] if j > 0 else -np.inf
            high = current[j + 1] if j + 1 < m else np.inf
            for c in candidates[(candidates >= low) & (candidates <= high)]:
                trial = [*current[:j], float(c), *current[j + 1 :]]
                value = _fit_kappa(people, s, trial, scale)
                if value > best + 1e-12:
                    best, current, improved = value, trial, True
        if not improved:
            break
    return current


@dataclass
class Calibration:
    """A calibration run's record (module docstring) and the judgments it made."""

    record: dict[str, Any]
    judgments: list[dict[str, Any]]

    def write(self, out_dir: Path) -> list[Path]:
        names = (CALIBRATION_JUDGMENTS, CALIBRATION_JSON, CALIBRATION_MD)
        files = [out_dir / name for name in names]
        atomic_write_text(files[0], jsonl_text(self.judgments))
        atomic_write_json(files[1], self.record)
        atomic_write_text(files[2], calibration_markdown(self.record))
        return files


def _groups(
    pairs: Sequence[LabelledPair],
    indices: Sequence[int],
    people: Sequence[int],
    mapped: Sequence[int | None],
    own: Sequence[int | None],
    scale: Sequence[int],
    raw_scale: Sequence[int] | None,
) -> dict[str, Agreement]:
    """Agreement overall and per query type over the judged pairs of `indices`."""
    by_type: dict[str, list[tuple[int, int, int]]] = {ALL: []}
    for i in indices:
        grade, own_grade = mapped[i], own[i]
        if grade is None or own_grade is None:
            continue
        row = (people[i], grade, own_grade)
        by_type[ALL].append(row)
        by_type.setdefault(pairs[i].query.query_type, []).append(row)
    return {
        name: agreement(
            [r[0] for r in rows],
            [r[1] for r in rows],
            scale,
            judge_raw=[r[2] for r in rows] if raw_scale else None,
            raw_scale=raw_scale,
            weights=WEIGHTS,
            min_pairs=MIN_PAIRS,
        )
        for name, rows in by_type.items()
    }


def calibrate(
    evalset: Path,
    corpus: Path,
    judge: Judge,
    cache: JudgeCache,
    scale: Sequence[int],
    sample: int | None,
    seed: int,
) -> Calibration:
    """Judge a sample of people's labels of `evalset` and measure the agreement (module
    docstring)."""
    queries = load_evalset(evalset)
    passages_file = corpus / "passages.jsonl" if corpus.is_dir() else corpus
    texts = {p.id: passage_text(p) for p in load_passages(passages_file)}
    available = labelled_pairs(queries, texts)
    if not available:
        raise BenchError(f"{evalset}: no label people gave to a passage of {corpus}")
    pairs = draw(available, sample, seed)
    people = [p.people_grade for p in pairs]
    outside = sorted({g for g in people if g not in scale})
    if outside:
        raise ConfigError(
            "--grades",
            f"{evalset} holds people's grades {outside}, outside the scale {list(scale)}",
        )
    verdicts = judge_pairs([p.pair for p in pairs], judge, cache)
    fit: dict[str, Any] | None = None
    evaluated = list(range(len(pairs)))
    if isinstance(judge, ScoreJudge) and judge.thresholds is None:
        fit_idx, evaluated = split(pairs, seed)
        scores = {i: v.raw for i, v in enumerate(verdicts) if isinstance(v.raw, float)}
        fitted = [i for i in fit_idx if i in scores]
        judge.thresholds = fit_thresholds(
            [people[i] for i in fitted], [float(scores[i]) for i in fitted], scale
        )
        verdicts = [
            dataclasses.replace(v, grade=judge.grade_of(float(scores[i]))) if i in scores else v
            for i, v in enumerate(verdicts)
        ]
        fit = {
            "thresholds": judge.thresholds,
            "fit_pairs": len(fit_idx),
            "fit_queries": len({pairs[i].pair.query_id for i in fit_idx}),
            "fit_query_ids": sorted({pairs[i].pair.query_id for i in fit_idx}),
            "evaluated_pairs": len(evaluated),
            "evaluated_queries": len({pairs[i].pair.query_id for i in evaluated}),
        }
    mapped = [judge.to_scale(v.grade) if v.grade is not None else None for v in verdicts]
    own = [v.grade for v in verdicts]
    raw_scale = JUDGE_SCALE if not isinstance(judge, ScoreJudge) else None
    groups = _groups(pairs, evaluated, people, mapped, own, scale, raw_scale)
    tally = Tally()
    for v in verdicts:
        tally.add(v)
    record: dict[str, Any] = {
        "judge": judge.describe(),
        "evalset": str(evalset),
        "evalset_sha256": file_sha256(evalset),
        "scale": list(scale),
        "sample": {
            "available": len(available),
            "pairs": len(pairs),
            "queries": len({p.pair.query_id for p in pairs}),
            "seed": seed,
        },
        "fit": fit,
        "min_pairs": MIN_PAIRS,
        "weights": WEIGHTS,
        "agreement": {name: a.to_json() for name, a in groups.items()},
        "tally": tally.to_json(),
    }
    if raw_scale is not None and tuple(scale) == (0, 1):
        record["kappa_by_cut"] = _kappa_by_cut(
            [people[i] for i in evaluated], [own[i] for i in evaluated]
        )
    judgments = [
        judgment_record(_pool_record(p), p.pair, v, judge)
        for p, v in zip(pairs, verdicts, strict=True)
    ]
    return Calibration(record, judgments)


def _kappa_by_cut(people: Sequence[int], own: Sequence[int | None]) -> dict[str, Any]:
    """Binary kappa if relevance started at each grade 1..3 of the judge's own scale."""
    kept = [(p, g) for p, g in zip(people, own, strict=True) if g is not None]
    out: dict[str, Any] = {}
    for cut in JUDGE_SCALE[1:]:
        a = [int(p > 0) for p, _ in kept]
        b = [int(g >= cut) for _, g in kept]
        note = kappa_note(a, b) if len(kept) >= MIN_PAIRS else f"fewer than {MIN_PAIRS} pairs"
        out[str(cut)] = None if note else cohen_kappa(a, b, (0, 1))
    return out


def _pool_record(p: LabelledPair) -> dict[str, Any]:
    """A labelled pair as a pool record (what the judgment file's other fields follow)."""
    return {
        "query_id": p.query.query_id,
        "query": p.query.query,
        "query_type": p.query.query_type,
        "label_status": p.query.label_status,
        "id": p.pair.passage_id,
        "text": p.pair.passage,
    }


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def calibration_markdown(record: Mapping[str, Any]) -> str:
    """calibration.md: the agreement tables a person reads."""
    judge = record["judge"]
    sample = record["sample"]
    lines = [
        f"# Judge calibration: {judge['kind']} {judge['model']}",
        "",
        f"Against people's labels in `{record['evalset']}` (sha256 "
        f"{record['evalset_sha256'][:12]}): {sample['pairs']} of {sample['available']} "
        f"labelled pairs, {sample['queries']} queries (seed {sample['seed']}); scale "
        f"{','.join(map(str, record['scale']))}.",
    ]
    fit = record.get("fit")
    if fit:
        lines += [
            "",
            f"Thresholds chosen on {fit['fit_pairs']} pairs of {fit['fit_queries']} queries: "
            f"{', '.join(f'{t:.4g}' for t in fit['thresholds'])}; the agreement below is on the "
            f"other {fit['evaluated_pairs']} pairs of {fit['evaluated_queries']} queries "
            f"(`--thresholds {','.join(f'{t:.6g}' for t in fit['thresholds'])}`).",
        ]
    elif judge.get("thresholds"):
        lines += ["", f"Thresholds given: {', '.join(f'{t:.4g}' for t in judge['thresholds'])}."]
    lines += [
        "",
        f"Kappa is not estimated for fewer than {record['min_pairs']} pairs, or where a rater "
        "gave one grade only. Weighted kappa: "
        f"{record['weights']} weights over the scale.",
        "",
        "| type | pairs | kappa (relevant or not) | weighted kappa | note |",
        "|---|---:|---:|---:|---|",
    ]
    groups = record["agreement"]
    for name in [*(n for n in groups if n != ALL), ALL]:
        g = groups[name]
        lines.append(
            f"| {name} | {g['n']} | {_fmt(g['kappa_binary'])} | {_fmt(g['kappa_weighted'])} | "
            f"{g['note'] or ''} |"
        )
    confusion = groups[ALL]["confusion"]
    lines += [
        "",
        "Confusion (all types): rows people's grade, columns the judge's grade",
        "",
        "| people \\ judge | " + " | ".join(map(str, confusion["columns"])) + " |",
        "|---|" + "---:|" * len(confusion["columns"]),
    ]
    for grade, row in zip(confusion["rows"], confusion["counts"], strict=True):
        lines.append(f"| {grade} | " + " | ".join(map(str, row)) + " |")
    cuts = record.get("kappa_by_cut")
    if cuts:
        lines += [
            "",
            "Binary kappa if the judge's grades count as relevant from each cut "
            "(`--relevant-from`): "
            + ", ".join(f"from {cut}: {_fmt(value)}" for cut, value in cuts.items()),
        ]
    tally = record["tally"]
    if tally["unjudged"]:
        reasons = ", ".join(f"{r} {n}" for r, n in tally["unjudged"].items())
        lines += ["", f"Unjudged pairs (left out of the agreement): {reasons}."]
    return "\n".join(lines) + "\n"
