"""Refusal: would a score threshold answer the answerable queries and refuse the others?

The decision rule is "answer when the top score of the chosen stage is >= t, else refuse". A
query whose ranking at that stage is empty has no top score and is refused at every threshold.
Scoring reads only the recorded scores of one stage (`{query id: [scores, best first]}`).

Which score. Scores are comparable only within one scoring function: a dense arm's top cosine,
a BM25 arm's top score, or an RRF sum of 1/(k + rank), which measures rank agreement between
arms, not how well any passage matches. `refusal.score_stage` chooses the stage: any stage the
job recorded (an arm by its name, `fused`, `rerank`, `final`, `context`); a name no query
recorded is refused, naming the key and the recorded stages. "auto" takes the first of `rerank`
(a cross-encoder's relevance logit, the score meant to say how well a passage answers), the
dense arm, bm25 that every query recorded, else `final`. The chosen stage is named in
metrics.json and in the report.

Populations:
- should answer: the queries the doc metrics score (reviewed, relevant ids in the corpus) that
  have at least one relevant passage the asker may read;
- should refuse: `no_answer` queries ("no_answer") and scorable queries none of whose relevant
  passages the asker may read ("no_readable_relevant": the policy set's `permission` queries).
  The right behaviour for that user is to refuse whatever the pipeline's configuration; with the
  permission filter on a system can achieve it, with the filter off its top score comes from
  the restricted passage and it answers: counted against it, because that answer leaks;
- excluded with the doc metrics' reasons (unreviewed, no relevant ids, gold missing), and
  "stage_not_recorded" when the query has no ranking at the chosen stage.

Rates at a threshold t: `answered_rate` = share of should-answer queries with top score >= t
(answered when answerable); `refused_rate` = share of should-refuse queries with top score < t
(refused when unanswerable). As t rises the first never increases and the second never
decreases. The table evaluates `refusal.thresholds` points evenly spaced from the lowest to the
highest observed top score.

Balanced threshold: over every distinct observed top score (the only thresholds that change a
decision), the one where the two rates are closest (|answered_rate - refused_rate| smallest, the
equal-error point); ties go to the higher mean of the two rates, then to the lowest threshold.
Beside it, `best_mean` is the threshold maximising that mean (balanced accuracy), which with
few unanswerable queries can sit at an extreme. Both are fitted on this evaluation set, so they
are optimistic for new queries. Undefined (with the reason) when either
population is empty or no query has a score.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np

from retrieval_bench.config.refusal import AUTO
from retrieval_bench.errors import ConfigError, nearest_hint
from retrieval_bench.scoring.labels import NO_ANSWER, UNKNOWN_TYPE, Judgements
from retrieval_bench.scoring.permissions import NO_READABLE_RELEVANT

AUTO_ORDER = ("rerank", "dense", "bm25")
ANSWER = "answer"
REFUSE = "refuse"
STAGE_NOT_RECORDED = "stage_not_recorded"


def check_stage(requested: str, stages: Collection[str]) -> None:
    """Refuse a `refusal.score_stage` that is neither auto nor one of `stages` (the stage names
    a job records), with the nearest name."""
    if requested != AUTO and requested not in stages:
        known = [AUTO, *stages]
        hint = nearest_hint(requested, known)
        if not hint.startswith("known"):
            hint += f" (known: {', '.join(known)})"
        raise ConfigError(
            "refusal.score_stage", f"'{requested}' is not a stage this job records; {hint}"
        )


def choose_stage(requested: str, recorded: Sequence[Collection[str]]) -> str:
    """The stage whose scores decide: `requested` (refused when no query recorded it), or for
    "auto" the first of rerank, dense, bm25 that every query recorded, else "final"."""
    if requested != AUTO:
        check_stage(requested, list(dict.fromkeys(name for r in recorded for name in r)))
        return requested
    for name in AUTO_ORDER:
        if recorded and all(name in stages for stages in recorded):
            return name
    return "final"


def top_scores(scores: Mapping[str, Sequence[float]]) -> dict[str, float]:
    """The best score per query; -inf for an empty ranking (nothing to answer from)."""
    return {qid: (float(s[0]) if len(s) else -np.inf) for qid, s in scores.items()}


def populations(
    judgements: Judgements, unreadable: Collection[str]
) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """(should, why_refuse, excluded): {qid: "answer" | "refuse"}, {qid: "no_answer" |
    "no_readable_relevant"} for the should-refuse ones, {qid: exclusion reason} for the rest."""
    unreadable = set(unreadable)
    should: dict[str, str] = {}
    why_refuse: dict[str, str] = {}
    for qid in judgements.qrels:
        should[qid] = REFUSE if qid in unreadable else ANSWER
        if qid in unreadable:
            why_refuse[qid] = NO_READABLE_RELEVANT
    for qid in judgements.no_answer:
        should[qid] = REFUSE
        why_refuse[qid] = NO_ANSWER
    excluded = {q: r for q, r in judgements.excluded.items() if q not in should}
    return should, why_refuse, excluded


def answered_rate(answer_scores: np.ndarray, threshold: float) -> float | None:
    """Share of should-answer queries whose top score reaches the threshold."""
    return float(np.mean(answer_scores >= threshold)) if answer_scores.size else None


def refused_rate(refuse_scores: np.ndarray, threshold: float) -> float | None:
    """Share of should-refuse queries whose top score stays below the threshold."""
    return float(np.mean(refuse_scores < threshold)) if refuse_scores.size else None


def threshold_grid(scores: np.ndarray, n: int) -> list[float]:
    """`n` thresholds evenly spaced over the finite observed scores (one if they are equal)."""
    finite = scores[np.isfinite(scores)]
    if not finite.size:
        return []
    lo, hi = float(finite.min()), float(finite.max())
    return [lo] if lo == hi else np.linspace(lo, hi, n).tolist()


def threshold_table(
    answer_scores: np.ndarray, refuse_scores: np.ndarray, thresholds: Sequence[float] | np.ndarray
) -> dict[str, list[Any]]:
    """Columns over thresholds: rates and the counts behind them."""
    t = np.asarray(thresholds, dtype=np.float64)
    answered = (answer_scores[None, :] >= t[:, None]).sum(axis=1)
    refused = (refuse_scores[None, :] < t[:, None]).sum(axis=1)
    return {
        "threshold": t.tolist(),
        "answered": answered.tolist(),
        "answered_rate": (answered / answer_scores.size).tolist() if answer_scores.size else [],
        "refused": refused.tolist(),
        "refused_rate": (refused / refuse_scores.size).tolist() if refuse_scores.size else [],
    }


def balanced_threshold(answer_scores: np.ndarray, refuse_scores: np.ndarray) -> dict[str, Any]:
    """The equal-error threshold (rates closest; ties: higher mean, then lowest t), and the
    threshold of best mean beside it."""
    if not answer_scores.size or not refuse_scores.size:
        missing = "should-answer" if not answer_scores.size else "should-refuse"
        return {"threshold": None, "undefined": f"no {missing} queries"}
    everything = np.concatenate([answer_scores, refuse_scores])
    candidates = np.unique(everything[np.isfinite(everything)])
    if not candidates.size:
        return {"threshold": None, "undefined": "no query has a score at this stage"}
    table = threshold_table(answer_scores, refuse_scores, candidates)
    a = np.asarray(table["answered_rate"])
    r = np.asarray(table["refused_rate"])
    mean = (a + r) / 2
    gap = np.abs(a - r)
    # lexsort: last key is primary.
    best = int(np.lexsort((candidates, -mean, gap))[0])
    best_mean = int(np.lexsort((candidates, gap, -mean))[0])
    return {
        "threshold": float(candidates[best]),
        "answered_rate": float(a[best]),
        "refused_rate": float(r[best]),
        "balanced_accuracy": float(mean[best]),
        "criterion": "min |answered_rate - refused_rate|; ties: higher mean, then lowest t",
        "best_mean": {
            "threshold": float(candidates[best_mean]),
            "answered_rate": float(a[best_mean]),
            "refused_rate": float(r[best_mean]),
            "balanced_accuracy": float(mean[best_mean]),
        },
    }


def score_refusal(
    scores: Mapping[str, Sequence[float]],
    judgements: Judgements,
    unreadable: Collection[str],
    stage: str,
    n_thresholds: int,
) -> dict[str, Any]:
    """The refusal evaluation of one stage's top scores (layout: see the keys below)."""
    role, refuse_reason, excluded = populations(judgements, unreadable)
    top = top_scores(scores)
    for qid in list(role):
        if qid not in top:
            excluded[qid] = STAGE_NOT_RECORDED
            del role[qid]
    answer = [q for q in role if role[q] == ANSWER]
    refuse = [q for q in role if role[q] == REFUSE]
    sa = np.array([top[q] for q in answer], dtype=np.float64)
    sr = np.array([top[q] for q in refuse], dtype=np.float64)
    grid = threshold_grid(np.concatenate([sa, sr]), n_thresholds)
    balanced = balanced_threshold(sa, sr)
    if not scores:
        balanced = {"threshold": None, "undefined": f"stage {stage!r} recorded no ranking"}
    types = judgements.query_types
    by_type: dict[str, dict[str, Any]] = {}
    if balanced["threshold"] is not None:
        t = balanced["threshold"]
        for qtype in sorted({types.get(q, UNKNOWN_TYPE) for q in role}):
            members = [q for q in role if types.get(q, UNKNOWN_TYPE) == qtype]
            ok = [(top[q] >= t) == (role[q] == ANSWER) for q in members]
            by_type[qtype] = {
                "n": len(members),
                "should": sorted({role[q] for q in members}),
                "correct_rate": float(np.mean(ok)),
            }
    refuse_counts = Counter(refuse_reason[q] for q in refuse)
    excluded_counts = Counter(excluded.values())
    return {
        "stage": stage,
        "rule": "answer when the stage's top score >= threshold, else refuse",
        "counts": {
            "scored": len(role),
            "should_answer": len(answer),
            "should_refuse": dict(sorted(refuse_counts.items())),
            "excluded": dict(sorted(excluded_counts.items())),
        },
        "table": threshold_table(sa, sr, grid),
        "balanced": balanced,
        "at_balanced_by_type": by_type,
        "per_query": {
            q: {
                "query_type": types.get(q, UNKNOWN_TYPE),
                "should": role[q],
                "reason": refuse_reason.get(q),
                "top_score": top[q] if np.isfinite(top[q]) else None,
            }
            for q in role
        },
        "excluded_queries": dict(excluded),
    }
