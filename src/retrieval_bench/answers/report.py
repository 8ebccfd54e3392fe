"""answers.md and the terminal summary of `run.answers`: tables read from the answers.json
record alone (imports nothing above the records)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from retrieval_bench.answers.score import DIAGNOSIS, IN_CONTEXT, NOT_IN_CONTEXT
from retrieval_bench.reports.tables import fmt, markdown_table, text_table
from retrieval_bench.scoring.registry import JUDGE_PREFIX

ALL = "all"
Table = tuple[list[str], list[list[Any]]]


def _types(record: Mapping[str, Any]) -> list[str]:
    found: set[str] = set()
    for family in record["families"].values():
        found.update(family.get("by_type") or {})
    return [*sorted(found), ALL]


def _value(family: Mapping[str, Any], qtype: str, name: str) -> Any:
    group = family["overall"] if qtype == ALL else (family.get("by_type") or {}).get(qtype, {})
    return group.get(name)


def _judges(record: Mapping[str, Any]) -> list[str]:
    return [n for n in record["families"] if n.startswith(JUDGE_PREFIX)]


def answer_table(record: Mapping[str, Any]) -> Table:
    """Per query type: the answer metrics (macro means; `pooled` as named)."""
    fam = record["families"]
    answered: dict[str, int] = {}
    for query in record["queries"].values():
        answered[query["query_type"]] = answered.get(query["query_type"], 0) + 1
    answered[ALL] = len(record["queries"])
    columns = [
        ("n scored", "sources", "n"),
        ("source_coverage", "sources", "source_coverage"),
        ("pooled", "sources", "source_coverage_pooled"),
        ("citation_precision", "citation_precision", "citation_precision"),
        ("citation_validity", "citations", "citation_validity"),
        ("refusal_correct", "refusal", "refusal_correct"),
        *((name, name, name.removeprefix(JUDGE_PREFIX)) for name in _judges(record)),
    ]
    header = ["type", "answered", *(c[0] for c in columns)]
    rows = [
        [t, answered.get(t, 0), *(_value(fam[f], t, m) for _, f, m in columns)]
        for t in _types(record)
    ]
    return header, rows


def diagnosis_table(record: Mapping[str, Any]) -> Table:
    """Per type: relevant passages by where they were lost, and cited passages not relevant
    (counts summed over the scored queries)."""
    header = ["type", "queries", *DIAGNOSIS.values()]
    rows = [
        [t, entry["queries"], *(entry[k] for k in DIAGNOSIS)]
        for t, entry in record["diagnosis"].items()
    ]
    return header, rows


def refusal_table(record: Mapping[str, Any]) -> Table:
    """Per type: the generator's refusals beside the retrieval-score rule at its balanced
    threshold (metrics.json `refusal`)."""
    fam = record["families"]["refusal"]
    retrieval = (record.get("retrieval_refusal") or {}).get("at_balanced_by_type") or {}
    header = [
        "type",
        "n",
        "refusal_correct",
        "answered_rate",
        "refused_rate",
        "retrieval score correct (balanced t)",
    ]
    rows = []
    for t in _types(record):
        n = _value(fam, t, "n")
        if not n:
            continue
        at_t = (retrieval.get(t) or {}).get("correct_rate") if t != ALL else None
        rows.append(
            [
                t,
                n,
                _value(fam, t, "refusal_correct"),
                _value(fam, t, "answered_rate"),
                _value(fam, t, "refused_rate"),
                at_t if t != ALL else _balanced(record),
            ]
        )
    return header, rows


def _balanced(record: Mapping[str, Any]) -> Any:
    return (record.get("retrieval_refusal") or {}).get("at_balanced_all")


def judge_table(record: Mapping[str, Any]) -> Table:
    """Per type and judge score: its mean where the context held a relevant passage and
    where it held none (n in brackets)."""
    header = ["type", "score", f"{IN_CONTEXT} (n)", f"{NOT_IN_CONTEXT} (n)"]
    rows = []
    for name in _judges(record):
        fam = record["families"][name]
        metric = name.removeprefix(JUDGE_PREFIX)
        for t in _types(record):
            cells = []
            for hit in (IN_CONTEXT, NOT_IN_CONTEXT):
                group = (
                    (fam.get("by_context") or {}).get(hit, {})
                    if t == ALL
                    else (fam.get("by_type_context") or {}).get(f"{t} | {hit}", {})
                )
                n = group.get("n", 0)
                cells.append(f"{fmt(group.get(metric))} ({n})" if n else "-")
            if cells != ["-", "-"]:
                rows.append([t, metric, *cells])
    return header, rows


def problem_lines(record: Mapping[str, Any]) -> list[str]:
    """One line per problem counted in the answers file (answers.json `answers.problems`)."""
    problems = record["answers"]["problems"]
    lines = []
    if "unknown_queries" in problems:
        p = problems["unknown_queries"]
        lines.append(
            f"{p['count']} answers for queries the job does not know, skipped: "
            + "; ".join(p["examples"])
        )
    for key, what in (
        ("judge_out_of_range", "out of its declared range"),
        ("judge_nan", "NaN or null"),
    ):
        for name, p in (problems.get(key) or {}).items():
            lines.append(
                f"{p['count']} {name} scores {what}, not scored: " + "; ".join(p["examples"])
            )
    if problems.get("judge_undeclared"):
        names = ", ".join(f"{k} ({v})" for k, v in problems["judge_undeclared"].items())
        lines.append(
            f"undeclared judge scores, not scored (declare with --judge NAME=LOW:HIGH): {names}"
        )
    if "pattern_matched_nothing" in problems:
        lines.append(str(problems["pattern_matched_nothing"]))
    unmapped = _unmapped(record)
    if unmapped:
        examples = ", ".join(sorted(set(unmapped))[:5])
        lines.append(
            f"{len(unmapped)} citations name no passage (no id, title or doc_id matches), "
            f"counted as not valid: {examples}"
        )
    return lines


def _unmapped(record: Mapping[str, Any]) -> list[str]:
    return [c for q in record["queries"].values() for c in q["unmapped"]]


def _heading_lines(record: Mapping[str, Any]) -> list[str]:
    ctx = record["context"]
    lines = [
        f"Answers: {record['answers']['path']} ({record['answers']['answered']} answers of "
        f"{record['answers']['lines']} lines scored).",
        f"Context: stage `{ctx['stage']}`" + (f" ({ctx['note']})." if ctx["note"] else "."),
    ]
    return lines


def answers_markdown(record: Mapping[str, Any], job: str) -> str:
    """answers.md: the per-type answer table, the diagnosis split, refusal beside the
    retrieval-score rule, judge scores split by context, and every problem counted."""
    blocks: list[str] = [f"# Answers: {job}", "", *_heading_lines(record), ""]
    problems = problem_lines(record)
    if problems:
        blocks += ["Problems counted in the answers file:", ""]
        blocks += [f"- {line}" for line in problems] + [""]
    sections: Sequence[tuple[str, str, Table]] = (
        (
            "Answer metrics per query type",
            "Macro means over each metric's scored queries; `pooled`: cited relevant / relevant "
            "summed over the type; undef: no scored query (see answers.json counts).",
            answer_table(record),
        ),
        (
            "Where relevant passages were lost",
            "Passages summed over the scored queries: relevant ones in the context and cited, in "
            "the context and not cited, not in the context; cited ones not labelled relevant.",
            diagnosis_table(record),
        ),
        (
            "Refusal",
            "The generator's own refusals (`refused`) beside the retrieval-score rule of "
            "metrics.json at its balanced threshold.",
            refusal_table(record),
        ),
        (
            "Judge scores by context",
            "Mean judge score where the context held a relevant passage and where it held none.",
            judge_table(record),
        ),
    )
    for title, caption, (header, rows) in sections:
        if rows:
            blocks += [f"## {title}", "", caption, "", markdown_table(header, rows), ""]
    return "\n".join(blocks)


def answers_text(record: Mapping[str, Any]) -> str:
    """The terminal summary: the answer table, the diagnosis split and the problems."""
    lines = _heading_lines(record)
    for header, rows in (answer_table(record), diagnosis_table(record)):
        lines += ["", text_table(header, rows)]
    lines += [f"warning: {line}" for line in problem_lines(record)]
    return "\n".join(lines)
