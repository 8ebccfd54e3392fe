"""What a labelling plan is drawn on: two finished jobs of one native dataset, a label snapshot
(people's labels, and the model judge's grades where it gave them), and from them the queries
of the plan (its population), their pooled pairs at the jobs' top K, and which of those pairs
people have labelled.

The population is every `reviewed` query both jobs ranked that holds at least one relevant
passage by people's labels: the queries the comparison scores under people's labels, whatever
people add later (an added label never removes a relevant one). A pooled pair is open while no
person labelled it; a query with no open pair is known already (labelled with certainty).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from retrieval_bench.active.compared import Compared, parse_metric
from retrieval_bench.data.evalset import load_evalset
from retrieval_bench.data.jsonl import file_sha256
from retrieval_bench.data.passages import load_passages
from retrieval_bench.errors import BenchError
from retrieval_bench.jobdir.files import read_rankings
from retrieval_bench.jobdir.job_sets import assign_labels, group_by_dataset
from retrieval_bench.jobdir.read import FinishedJob, load_jobs
from retrieval_bench.labels.pool import corpus_of
from retrieval_bench.records import EvalQuery, Passage


class PlanError(BenchError):
    """A plan cannot be drawn or read as asked (exit 2, naming what is wrong)."""


@dataclass
class PlanContext:
    jobs: list[FinishedJob]
    stage: str
    metric: str
    k: int
    labels: Path
    labels_sha256: str
    queries: list[EvalQuery]
    outside: list[str]
    compared: Compared
    passages: dict[str, Passage]

    @property
    def systems(self) -> tuple[str, ...]:
        return self.compared.systems

    def people(self) -> list[dict[str, int]]:
        return [q.people_relevance for q in self.queries]

    def open_pairs(self) -> np.ndarray:
        """Per pooled pair: True where no person has labelled it."""
        people = self.people()
        return np.array(
            [
                self.compared.passage_ids[code] not in people[row]
                for row, code in zip(
                    self.compared.pair_query.tolist(), self.compared.pair_code.tolist(), strict=True
                )
            ],
            dtype=bool,
        )

    def judge_grades(self) -> np.ndarray:
        """Per pooled pair: the judge's grade on the set's scale, NaN where it gave none."""
        out = np.full(len(self.compared.pair_code), np.nan)
        for j, (row, code) in enumerate(
            zip(self.compared.pair_query.tolist(), self.compared.pair_code.tolist(), strict=True)
        ):
            grade = self.queries[row].judge.get(self.compared.passage_ids[code])
            if grade is not None:
                out[j] = grade.grade
        return out

    def people_grades(self) -> np.ndarray:
        """Per pooled pair: people's grade, NaN where open."""
        people = self.people()
        return np.array(
            [
                float(people[row].get(self.compared.passage_ids[code], np.nan))
                for row, code in zip(
                    self.compared.pair_query.tolist(), self.compared.pair_code.tolist(), strict=True
                )
            ]
        )


def find_jobs(dirs: Sequence[Path]) -> list[FinishedJob]:
    """The two finished jobs under `dirs` (a sweep of two, or two job folders), labelled as a
    comparison labels them; PlanError otherwise."""
    jobs = load_jobs(list(dirs))
    if len(jobs) != 2:
        raise PlanError(
            f"{', '.join(map(str, dirs))}: {len(jobs)} finished jobs; a plan compares two "
            "(give two job folders, or a folder holding two)"
        )
    if len(group_by_dataset(jobs)) != 1:
        raise PlanError(f"the jobs ran different datasets: {[job.dataset for job in jobs]}")
    if len({job.top_k for job in jobs}) != 1:
        raise PlanError(f"the jobs' top_k differ ({[job.top_k for job in jobs]}): one pool depth")
    assign_labels(jobs)
    return jobs


def load_context(jobs: list[FinishedJob], labels: Path, stage: str, metric: str) -> PlanContext:
    """The plan's context (module docstring): the jobs' pooled pairs at their top K against
    `labels`, a native evaluation set or snapshot of the jobs' dataset."""
    passages_path, _ = corpus_of(jobs)
    passages = {p.id: p for p in load_passages(passages_path)}
    queries = load_evalset(labels)
    name, k = parse_metric(metric, jobs[0].top_k, "--metric")
    tops = {}
    for job in jobs:
        ranked = {}
        for record in read_rankings(job.path):
            if stage not in record.stages:
                continue
            ranked[record.query.query_id] = record.stages[stage].ids
        if not ranked:
            raise PlanError(f"{job.path}: no query ranked at stage {stage!r} (--stage)")
        tops[job.label] = ranked
    population, outside = [], []
    for query in queries:
        in_both = all(query.query_id in tops[label] for label in tops)
        relevant = any(g > 0 for g in query.people_relevance.values())
        if query.label_status == "reviewed" and in_both and relevant:
            population.append(query)
        elif in_both:
            outside.append(query.query_id)
    if not population:
        raise PlanError(
            f"{labels}: no reviewed query that both jobs ranked holds a relevant passage by "
            "people's labels: nothing to plan"
        )
    compared = Compared.build(
        [q.query_id for q in population],
        [q.query_type for q in population],
        tops,
        jobs[0].top_k,
    )
    for pid in set(compared.passage_ids) - set(passages):
        raise PlanError(f"the jobs ranked passage {pid!r}, which the corpus {passages_path} lacks")
    return PlanContext(
        jobs=jobs,
        stage=stage,
        metric=name,
        k=k,
        labels=labels,
        labels_sha256=file_sha256(labels),
        queries=population,
        outside=outside,
        compared=compared,
        passages=passages,
    )
