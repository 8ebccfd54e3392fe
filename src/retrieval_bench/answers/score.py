"""Answer metrics of one finished job: its answers joined to the context it recorded and to
the labels, per query type, with the retrieval metrics' exclusion and undefined rules.

The context an answer was given is the job's `context` stage when it recorded one (the
passages that fit the generator's budget), else its `final` stage (the cut to top_k), and
answers.json says which. Each citation resolves to passages (`read.CitationMap`); a citation
naming several passages (a document) cites those of them in the context, or, when none is, all
of them (it then points outside the context).

Families, each scored with `scoring.aggregate.summarise` (so each has overall / by_type /
counts / per_query, and a type with no scored query is undefined with the reason, never 0):

* `citations` (`citation_validity`): share of an answer's citations that point into its
  context, over the answers that cite something; an unmapped citation points nowhere, so it is
  not valid. Needs no labels, so every answered query counts whatever its label status.
* `sources` (`source_coverage`): labelled-relevant passages cited / labelled-relevant, macro
  and pooled, on the queries the retrieval metrics score (reviewed, relevant ids in the corpus;
  a refusal of such a query cites nothing and covers 0). Its per-query columns are the
  diagnosis split of the relevant passages: in the context and cited, in the context and not
  cited (the generator lost it), not in the context (retrieval lost it); beside them the cited
  passages not labelled relevant.
* `citation_precision`: cited passages labelled relevant / cited, on the same queries when
  they cite something.
* `refusal` (`refusal_correct`): the retrieval refusal's populations (`scoring.refusal`):
  should answer (scorable, a relevant passage the asker may read) and should refuse
  (`no_answer`, or nothing relevant readable); 1 when the answer's `refused` matches.
* `judge_<name>`: each declared judge score, on the scorable queries, split by whether the
  context held a relevant passage (recall of the context > 0), so a high faithfulness on a
  context without the answer is seen for what it is.

A query of the job without an answer is excluded as `not_in_answers`, never scored 0.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from retrieval_bench.answers.read import AnswerOptions, AnswersInput, CitationMap, read_answers
from retrieval_bench.data.jsonl import file_sha256, read_jsonl
from retrieval_bench.errors import DataError
from retrieval_bench.scoring.aggregate import summarise
from retrieval_bench.scoring.labels import Judgements
from retrieval_bench.scoring.refusal import REFUSE, populations
from retrieval_bench.scoring.registry import JUDGE_PREFIX, answer_measures

if TYPE_CHECKING:
    from retrieval_bench.config import DatasetConfig

ANSWERS_JSON = "answers.json"
ANSWERS_MD = "answers.md"
NOT_IN_ANSWERS = "not_in_answers"
CITATIONS_UNKNOWN = "citations_unknown"
NO_CITATIONS = "no_citations"
NO_SCORE = "no_score"
IN_CONTEXT = "relevant in context"
NOT_IN_CONTEXT = "no relevant in context"
# The diagnosis split of `sources`, in the report's order, with who lost the passage.
DIAGNOSIS = {
    "retrieved_cited": "retrieved and cited",
    "retrieved_not_cited": "retrieved, not cited (generation)",
    "cited_not_relevant": "cited, not relevant (retrieval or generation)",
    "not_retrieved": "relevant, not retrieved (retrieval)",
}


@dataclass
class Context:
    """The ids each query's generator was given, and from which recorded stage."""

    stage: str
    ids: dict[str, list[str]]
    note: str = ""


def read_context(rankings: Path) -> Context:
    """Each query's `context` stage from a job's rankings.jsonl, else its `final` stage."""
    stages: dict[str, dict[str, Any]] = {}
    for number, record in read_jsonl(rankings):
        qid, recorded = record.get("query_id"), record.get("stages")
        if not isinstance(qid, str) or not isinstance(recorded, dict):
            raise DataError(rankings, "not a rankings line (query_id, stages)", number)
        stages[qid] = recorded
    if stages and all("context" in s for s in stages.values()):
        return Context("context", {q: list(s["context"]["ids"]) for q, s in stages.items()})
    missing = [q for q, s in stages.items() if "final" not in s]
    if missing:
        raise DataError(rankings, f"no 'final' stage for {len(missing)} queries, e.g. {missing[0]}")
    note = (
        "the job recorded no context stage: the final stage (the cut to top_k) is taken as the "
        "context the generator saw"
    )
    return Context("final", {q: list(s["final"]["ids"]) for q, s in stages.items()}, note)


@dataclass
class Resolved:
    """One answer's citations resolved against its context."""

    cited: list[str] = field(default_factory=list)  # passage ids, first citation first
    citations: int = 0
    valid: int = 0
    unmapped: list[str] = field(default_factory=list)


def resolve(citations: Sequence[str], cmap: CitationMap, context: Collection[str]) -> Resolved:
    out = Resolved()
    seen: set[str] = set()
    for citation in citations:
        out.citations += 1
        ids = cmap.resolve(citation)
        if not ids:
            out.unmapped.append(citation)
            continue
        shown = [pid for pid in ids if pid in context]
        out.valid += bool(shown)
        for pid in shown or ids:
            if pid not in seen:
                seen.add(pid)
                out.cited.append(pid)
    return out


def score_answers(
    answers: AnswersInput,
    judgements: Judgements,
    unreadable: Collection[str],
    context: Context,
    cmap: CitationMap,
) -> dict[str, Any]:
    """The answers.json record (less where the files came from): every family, the
    diagnosis counts, the per-query values `run.compare` and the gate read, and each
    query's resolved citations (so every number traces back to a line of the file)."""
    types = dict(judgements.query_types)
    answered = [q for q in types if q in answers.answers]
    absent = {q: NOT_IN_ANSWERS for q in types if q not in answers.answers}
    resolved = {
        q: resolve(answers.answers[q].citations, cmap, set(context.ids.get(q, ())))
        for q in answered
    }
    known = answers.citations_known
    families: dict[str, Any] = {}

    # citations: label-free
    if known:
        cited_q = [q for q in answered if resolved[q].citations]
        excluded = {**absent, **{q: NO_CITATIONS for q in answered if not resolved[q].citations}}
    else:
        cited_q, excluded = [], {**absent, **dict.fromkeys(answered, CITATIONS_UNKNOWN)}
    n_cit = _ints([resolved[q].citations for q in cited_q])
    n_valid = _ints([resolved[q].valid for q in cited_q])
    families["citations"] = summarise(
        {
            "citation_validity": _ratio(n_valid, n_cit),
            "citations": n_cit,
            "valid_citations": n_valid,
            "unmapped_citations": _ints([len(resolved[q].unmapped) for q in cited_q]),
        },
        cited_q,
        types,
        excluded,
        ["citation_validity", "citation_validity_pooled"],
        pooled={"citation_validity_pooled": ("valid_citations", "citations")},
    )

    # sources and the diagnosis split: the retrieval metrics' scorable queries
    qrels = judgements.qrels
    relevant = {q: {d for d, g in qrels[q].items() if g > 0} for q in qrels}
    context_hit = {
        q: IN_CONTEXT if relevant[q] & set(context.ids.get(q, ())) else NOT_IN_CONTEXT
        for q in qrels
    }
    label_excluded = {
        **dict(judgements.excluded),
        **{q: r for q, r in absent.items() if q in qrels},
    }
    scorable = [q for q in qrels if q in answers.answers]
    if known:
        source_q, excluded = scorable, dict(label_excluded)
    else:
        source_q = []
        excluded = {**label_excluded, **dict.fromkeys(scorable, CITATIONS_UNKNOWN)}
    columns = _source_columns(source_q, relevant, resolved, context.ids)
    families["sources"] = summarise(
        columns,
        source_q,
        types,
        excluded,
        ["source_coverage", "source_coverage_pooled"],
        pooled={"source_coverage_pooled": ("cited_relevant", "n_relevant")},
    )
    precise = [q for q, n in zip(source_q, columns["cited"].tolist(), strict=True) if n]
    keep = np.isin(np.array(source_q, dtype=object), np.array(precise, dtype=object))
    families["citation_precision"] = summarise(
        {
            "citation_precision": _ratio(columns["cited_relevant"][keep], columns["cited"][keep]),
            "cited_relevant": columns["cited_relevant"][keep],
            "cited": columns["cited"][keep],
        },
        precise,
        types,
        {**excluded, **{q: NO_CITATIONS for q in source_q if q not in set(precise)}},
        ["citation_precision", "citation_precision_pooled"],
        pooled={"citation_precision_pooled": ("cited_relevant", "cited")},
    )

    # refusal: the retrieval refusal's populations
    should, _, refusal_excluded = populations(judgements, unreadable)
    refusal_q = [q for q in should if q in answers.answers]
    refusal_excluded = {
        **refusal_excluded,
        **{q: NOT_IN_ANSWERS for q in should if q not in answers.answers},
    }
    refused = np.array([answers.answers[q].refused for q in refusal_q], dtype=bool)
    should_refuse = np.array([should[q] == REFUSE for q in refusal_q], dtype=bool)
    families["refusal"] = summarise(
        {
            "refusal_correct": (refused == should_refuse).astype(np.float64),
            "should_answer": (~should_refuse).astype(np.int64),
            "answered_ok": (~should_refuse & ~refused).astype(np.int64),
            "should_refuse": should_refuse.astype(np.int64),
            "refused_ok": (should_refuse & refused).astype(np.int64),
        },
        refusal_q,
        types,
        refusal_excluded,
        ["refusal_correct", "answered_rate", "refused_rate"],
        pooled={
            "answered_rate": ("answered_ok", "should_answer"),
            "refused_rate": ("refused_ok", "should_refuse"),
        },
    )

    # judge scores, split by whether the context held a relevant passage
    judged_names = sorted({n for q in answered for n in answers.answers[q].scores})
    split = {
        "context": context_hit,
        "type_context": {q: f"{types[q]} | {hit}" for q, hit in context_hit.items()},
    }
    for name in judged_names:
        judged = [q for q in scorable if name in answers.answers[q].scores]
        families[JUDGE_PREFIX + name] = summarise(
            {name: np.array([answers.answers[q].scores[name] for q in judged], dtype=np.float64)},
            judged,
            types,
            {**label_excluded, **{q: NO_SCORE for q in scorable if q not in set(judged)}},
            [name],
            group_by=split,
        )

    return {
        "context": {"stage": context.stage, "note": context.note},
        "citations_known": known,
        "metrics": [*answer_measures(), *(JUDGE_PREFIX + n for n in judged_names)],
        "families": families,
        "diagnosis": diagnosis(families["sources"]),
        "summary": summary(families),
        "per_query": _per_query(families),
        "queries": {
            q: {
                "query_type": types[q],
                "line": answers.answers[q].line,
                "refused": answers.answers[q].refused,
                "citations": answers.answers[q].citations,
                "cited_by": answers.answers[q].cited_by,
                "cited": resolved[q].cited,
                "valid_citations": resolved[q].valid,
                "unmapped": resolved[q].unmapped,
                "context_hit": context_hit.get(q),
                "scores": answers.answers[q].scores,
            }
            for q in answered
        },
    }


def _ints(values: Sequence[int]) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def _ratio(top: np.ndarray, bottom: np.ndarray) -> np.ndarray:
    """top / bottom per query, for rows whose bottom is > 0 (the callers' scored rows)."""
    return np.asarray(top, dtype=np.float64) / np.maximum(np.asarray(bottom, dtype=np.float64), 1)


def _source_columns(
    scored: Sequence[str],
    relevant: Mapping[str, set[str]],
    resolved: Mapping[str, Resolved],
    contexts: Mapping[str, Sequence[str]],
) -> dict[str, np.ndarray]:
    rows: dict[str, list[int]] = {
        k: [] for k in ("n_relevant", "cited_relevant", "cited", *DIAGNOSIS, "context_hit")
    }
    for q in scored:
        gold, cited, shown = relevant[q], set(resolved[q].cited), set(contexts.get(q, ()))
        rows["n_relevant"].append(len(gold))
        rows["cited_relevant"].append(len(gold & cited))
        rows["cited"].append(len(cited))
        rows["retrieved_cited"].append(len(gold & shown & cited))
        rows["retrieved_not_cited"].append(len((gold & shown) - cited))
        rows["cited_not_relevant"].append(len(cited - gold))
        rows["not_retrieved"].append(len(gold - shown))
        rows["context_hit"].append(int(bool(gold & shown)))
    columns = {k: _ints(v) for k, v in rows.items()}
    return {
        "source_coverage": _ratio(columns["cited_relevant"], columns["n_relevant"]),
        **columns,
    }


def diagnosis(sources: Mapping[str, Any]) -> dict[str, Any]:
    """Per type (and `all`): the diagnosis split's passage counts summed over the scored
    queries, and how many queries have at least one passage in each."""
    out: dict[str, dict[str, Any]] = {}
    for row in sources["per_query"].values():
        for group in (row["query_type"], "all"):
            entry = out.setdefault(
                group, {"queries": 0, **{k: 0 for k in DIAGNOSIS}, "queries_with": {}}
            )
            entry["queries"] += 1
            for key in DIAGNOSIS:
                entry[key] += row[key]
                entry["queries_with"][key] = entry["queries_with"].get(key, 0) + bool(row[key])
    for entry in out.values():
        entry["queries_with"] = {k: entry["queries_with"].get(k, 0) for k in DIAGNOSIS}
    return dict(sorted(out.items(), key=lambda kv: (kv[0] == "all", kv[0])))


# The family each answer metric is scored in (judge_<name>: its own family).
FAMILY_OF = {
    "citation_validity": "citations",
    "source_coverage": "sources",
    "citation_precision": "citation_precision",
    "refusal_correct": "refusal",
}


def summary(families: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """metric -> {"overall": {"n", metric}, "by_type": {type: {"n", metric, "undefined"?}}}:
    each answer metric's macro means, in the shape of a metrics.json stage (for the trend)."""
    out: dict[str, dict[str, Any]] = {}
    for metric, family in [
        *FAMILY_OF.items(),
        *((n, n) for n in families if n not in FAMILY_OF.values()),
    ]:
        result = families[family]
        column = metric if family in FAMILY_OF.values() else metric.removeprefix(JUDGE_PREFIX)

        out[metric] = {
            "overall": _pick(result["overall"], metric, column),
            "by_type": {
                t: _pick(g, metric, column) for t, g in (result.get("by_type") or {}).items()
            },
        }
    return out


def _pick(group: Mapping[str, Any], metric: str, column: str) -> dict[str, Any]:
    kept = {"n": group.get("n", 0), metric: group.get(column)}
    if "undefined" in group:
        kept["undefined"] = group["undefined"]
    return kept


def _per_query(families: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """query id -> {query_type, each answer metric it has}: what compare and the gate read."""
    taken = {family: metric for metric, family in FAMILY_OF.items()}
    out: dict[str, dict[str, Any]] = {}
    for family, result in families.items():
        column = taken.get(family) or family.removeprefix(JUDGE_PREFIX)
        for qid, row in result["per_query"].items():
            entry = out.setdefault(qid, {"query_type": row["query_type"]})
            entry[taken.get(family, family)] = row[column]
    return dict(sorted(out.items()))


def load_job_answers(
    job_dir: str | Path,
    answers_path: str | Path,
    options: AnswerOptions | None = None,
    dataset: DatasetConfig | None = None,
) -> dict[str, Any]:
    """Score `answers_path` against the finished job in `job_dir`: the job's config (as
    `rescore` reads it), the dataset's labels now (`dataset`: another job's dataset config, as
    the gate re-scores a baseline with the current month's), the job's recorded context."""
    from retrieval_bench.job.runner import load_labelled
    from retrieval_bench.jobdir.read import job_config
    from retrieval_bench.scoring.families import ScoringContext

    job_dir, answers_path = Path(job_dir), Path(answers_path)
    options = options or AnswerOptions()
    options.validate()
    cfg = job_config(job_dir)
    if dataset is not None:
        cfg.dataset = dataset
    data, judgements, _ = load_labelled(cfg)
    _check_corpus(job_dir, data, cfg.dataset.format)
    context = read_context(job_dir / "rankings.jsonl")
    answers = read_answers(answers_path, judgements.query_types, options)
    unreadable = ScoringContext.from_dataset(data).unreadable(judgements)
    record = score_answers(answers, judgements, unreadable, context, CitationMap(data.passages))
    metrics = json.loads((job_dir / "metrics.json").read_text(encoding="utf-8"))
    retrieval_refusal = metrics.get("refusal") or {}
    return {
        "answers": {
            "path": str(answers_path.resolve()),
            "sha256": file_sha256(answers_path),
            "lines": answers.lines,
            "answered": len(answers.answers),
            "problems": answers.problems(),
        },
        "citation_pattern": options.citation_pattern,
        "judge_ranges": {k: list(v) for k, v in options.judge_ranges.items()},
        "labels": _labels_hash(data, cfg.dataset.format),
        **record,
        "retrieval_refusal": {
            **{k: retrieval_refusal.get(k) for k in ("stage", "balanced", "at_balanced_by_type")},
            "at_balanced_all": _overall_rate(retrieval_refusal.get("at_balanced_by_type") or {}),
        },
    }


def _overall_rate(by_type: Mapping[str, Mapping[str, Any]]) -> float | None:
    """The share of queries the retrieval-score rule decides right at its balanced threshold,
    over every type (the types' correct rates weighted by their sizes)."""
    n = sum(int(row["n"]) for row in by_type.values())
    if not n:
        return None
    return sum(float(row["correct_rate"]) * int(row["n"]) for row in by_type.values()) / n


def _labels_hash(data: Any, fmt: str) -> str | None:
    from retrieval_bench.data.hashes import hash_record

    return hash_record(data, fmt).get("labels", {}).get("hash")


def _check_corpus(job_dir: Path, data: Any, fmt: str) -> None:
    """Refuse a job whose corpus changed since it ran: its recorded context ids would name
    other passages than the generator saw."""
    from retrieval_bench.data.hashes import hash_record, short
    from retrieval_bench.jobdir.read import RescoreError

    manifest = json.loads((job_dir / "manifest.json").read_text(encoding="utf-8"))
    then = (manifest.get("corpus") or {}).get("hash")
    now = hash_record(data, fmt)["corpus"]["hash"]
    if then is not None and then != now:
        raise RescoreError(
            f"{job_dir}: its corpus changed since the job ran (corpus hash {short(then)} then, "
            f"{short(now)} now): its recorded context is not what the generator saw"
        )
