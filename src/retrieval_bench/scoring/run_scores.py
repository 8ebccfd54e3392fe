"""Score any run against any labels, from Python: `retrieval_bench.score(qrels, run, metrics)`.

The library door to what `python -m run.score` does on the command line (that command is a thin
wrapper over this): TREC files or plain dicts in, the mean and per-query value of each measure
out, with the counts of scored and excluded queries. A run's ranking is made the way trec_eval
makes it (score descending, ties by document id descending), so a dict and its TREC export score
alike; `complete=True` is trec_eval's `-c` (a labelled query missing from the run is an empty
ranking scoring 0, as a job scores it), else such queries are excluded and counted.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval_bench.data.evalset import load_evalset
from retrieval_bench.data.trec import read_qrels, read_run, run_rankings, trec_order
from retrieval_bench.errors import ConfigError
from retrieval_bench.scoring.aggregate import score_stage
from retrieval_bench.scoring.labels import Judgements, judge, judge_qrels
from retrieval_bench.scoring.measure_names import canonical_metric

# counts key of the labelled queries `complete` scored as empty rankings.
SCORED_ZERO = "not_in_run_scored_0"

Labels = str | os.PathLike[str] | Mapping[str, Mapping[str, int]]
Run = str | os.PathLike[str] | Mapping[str, Mapping[str, float]]


@dataclass(frozen=True)
class RunScores:
    """What `score` returns: each measure's mean over the scored queries (None: undefined, no
    query scored), each scored query's values, and the counts (`scored`, `excluded` by reason,
    `not_in_labels`, and with `complete` the queries scored as empty rankings)."""

    mean: dict[str, float | None]
    per_query: dict[str, dict[str, float]]
    counts: dict[str, Any]


def load_labels(qrels: Labels) -> Judgements:
    """A `.jsonl` path is a native evaluation set; another path is TREC qrels; a mapping is
    `{query id: {doc id: grade}}` (grade > 0 relevant, 0 judged non-relevant)."""
    if isinstance(qrels, Mapping):
        return judge_qrels(
            {str(q): {str(d): int(g) for d, g in docs.items()} for q, docs in qrels.items()}
        )
    path = Path(qrels)
    if path.suffix == ".jsonl":
        return judge(load_evalset(path), corpus_ids=None)
    return judge_qrels(read_qrels(path))


def load_rankings(run: Run) -> dict[str, list[str]]:
    """Each query's ranked ids, in trec_eval's order, from a TREC run path or
    `{query id: {doc id: score}}`."""
    if isinstance(run, Mapping):
        return run_rankings(
            {
                str(q): trec_order((str(d), float(s)) for d, s in docs.items())
                for q, docs in run.items()
            }
        )
    return run_rankings(read_run(Path(run)))


def cutoffs_of(metrics: Sequence[str]) -> tuple[list[str], list[int]]:
    """The project's names of `metrics` (ir_measures' spellings accepted: `nDCG@10`) and the
    cut-offs they need; ConfigError naming `metrics[i]` for an unknown or cut-off-less name."""
    names, cutoffs = [], []
    for i, spec in enumerate(metrics):
        name = canonical_metric(spec, f"metrics[{i}]")
        measure, at, k = name.partition("@")
        if not at or not k.isdigit():
            raise ConfigError(f"metrics[{i}]", f"{spec!r}: give a cut-off, e.g. {measure}@10")
        names.append(name)
        cutoffs.append(int(k))
    return names, sorted(set(cutoffs))


def score_rankings(
    rankings: Mapping[str, Sequence[str]],
    judgements: Judgements,
    cutoffs: Sequence[int],
    complete: bool = False,
) -> dict[str, Any]:
    """`score_stage` of a run's rankings. With `complete`, every scorable labelled query the
    run lacks is scored as the empty ranking it stands for, and counted (`SCORED_ZERO`)."""
    missing = [qid for qid in judgements.qrels if qid not in rankings]
    if complete:
        rankings = {**rankings, **dict.fromkeys(missing, ())}
    result = score_stage(rankings, judgements, cutoffs)
    if complete:
        result["counts"][SCORED_ZERO] = len(missing)
    return result


def score(
    qrels: Labels, run: Run, metrics: Sequence[str] = ("ndcg@10",), complete: bool = False
) -> RunScores:
    """Score `run` against `qrels` on `metrics` (module doc). Either may be a TREC file path or a
    dict; a bad file fails with its file and line, an unknown metric with the nearest name."""
    names, cutoffs = cutoffs_of(metrics)
    result = score_rankings(load_rankings(run), load_labels(qrels), cutoffs, complete)
    per_query = {
        qid: {name: float(values[name]) for name in names}
        for qid, values in result["per_query"].items()
    }
    mean = {name: result["overall"].get(name) for name in names}
    return RunScores(mean, per_query, result["counts"])
