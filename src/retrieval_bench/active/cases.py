"""A simulation case from two finished job folders and a judge: the queries both jobs scored,
their pooled pairs at the jobs' top K, people's labels (the evaluation set's) as the truth, and
the judge's verdict on every pooled pair (through the judge's cache, so a second simulation asks
nothing again)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from retrieval_bench.active.calibration import cells, score_ranks
from retrieval_bench.active.compared import Compared, parse_metric
from retrieval_bench.active.simulate import Case
from retrieval_bench.errors import BenchError
from retrieval_bench.job.runner import load_configured
from retrieval_bench.jobdir.files import job_config, read_rankings
from retrieval_bench.jobdir.read import FinishedJob
from retrieval_bench.judge.base import Judge, Pair, ScoreJudge, Verdict
from retrieval_bench.judge.cache import JudgeCache
from retrieval_bench.judge.judging import judge_pairs
from retrieval_bench.records import passage_text


def judge_verdicts(
    compared: Compared,
    texts: dict[str, str],
    queries: dict[str, str],
    judge: Judge,
    cache: JudgeCache,
) -> list[Verdict]:
    """The judge's verdict on every pooled pair, in pair order."""
    pairs = [Pair(qid, pid, queries[qid], texts[pid]) for qid, pid in compared.pair_ids()]
    return judge_pairs(pairs, judge, cache)


def judge_columns(
    verdicts: Sequence[Verdict], judge: Judge
) -> tuple[np.ndarray, np.ndarray | None]:
    """(each pair's score to rank by, each pair's grade as relevant 0/1 or None when the judge
    gives no grades): a score judge's score, else the judge's own grade (-1 where it gave
    none)."""
    scored = isinstance(judge, ScoreJudge)
    score = np.array(
        [
            float(v.raw)
            if scored and isinstance(v.raw, float)
            else float(v.grade)
            if v.grade is not None
            else -1.0
            for v in verdicts
        ]
    )
    if scored and getattr(judge, "thresholds", None) is None:
        return score, None
    judged = np.array(
        [1 if v.grade is not None and judge.to_scale(v.grade) > 0 else 0 for v in verdicts]
    )
    return score, judged


def build_case(
    jobs: Sequence[FinishedJob],
    stage: str,
    metric: str,
    judge: Judge,
    cache: JudgeCache,
    shuffle_seed: int | None = None,
) -> Case:
    """The case of two jobs (module docstring). `shuffle_seed`: permute the judge's verdicts
    over the pairs (seeded), a judge without signal, for the control the issue asks for."""
    first, second = jobs
    cfg = job_config(first.path)
    dataset = load_configured(cfg)
    name, k = parse_metric(metric, first.top_k, "--metric")
    scored = [set(job.per_query(stage, f"{name}@{k}")) for job in jobs]
    if not scored[0] and not scored[1]:
        raise BenchError(f"{first.path}: stage {stage!r} scored no query on {name}@{k}")
    queries = [q for q in dataset.queries if q.query_id in scored[0] and q.query_id in scored[1]]
    tops = {
        job.label: {
            r.query.query_id: (r.stages[stage].ids if stage in r.stages else [])
            for r in read_rankings(job.path)
        }
        for job in jobs
    }
    compared = Compared.build(
        [q.query_id for q in queries], [q.query_type for q in queries], tops, first.top_k
    )
    people = [q.people_relevance for q in queries]
    codes, grades = compared.label_layout(people)
    truth = compared.values(name, k, codes, grades)
    by_id = {q.query_id: q for q in queries}
    pair_relevant = np.array(
        [
            1.0 if by_id[qid].people_relevance.get(pid, 0) > 0 else 0.0
            for qid, pid in compared.pair_ids()
        ]
    )
    texts = {p.id: passage_text(p) for p in dataset.passages}
    verdicts = judge_verdicts(compared, texts, {q.query_id: q.query for q in queries}, judge, cache)
    score, judged = judge_columns(verdicts, judge)
    if shuffle_seed is not None:
        order = np.random.default_rng(shuffle_seed).permutation(len(score))
        score = score[order]
        judged = judged[order] if judged is not None else None
    pair_cell = cells(
        judged if judged is not None else np.zeros(len(score), dtype=np.int64),
        score_ranks(compared.pair_query, score),
        compared.best_ranks(),
    )
    return Case(
        name=f"{first.dataset}: {first.label} vs {second.label}",
        compared=compared,
        metric=name,
        k=k,
        truth=truth,
        pair_relevant=pair_relevant,
        pair_judged=judged,
        pair_cell=pair_cell,
    )
