"""The answer metrics' names, declared once: what `run.compare`, the gate and (later) the
metric registry may name. Imports nothing, so config validation can read it cheaply.

Each is a per-query value (higher is better, so the gate's "drop beyond tolerance" applies
unchanged), stored in `answers.json` `per_query` and aggregated per query type. Unlike the
retrieval metrics they carry no `@K`: they are measured on the context the generator was given
(the job's `context` stage, else `final`), whatever its length.
"""

from __future__ import annotations

# name -> what one query's value is. The order is the report's.
ANSWER_METRICS: dict[str, str] = {
    "source_coverage": "labelled-relevant passages cited / labelled-relevant passages",
    "citation_precision": "cited passages labelled relevant / cited passages",
    "citation_validity": "citations pointing into the context the answer was given / citations",
    "refusal_correct": "1 when it refused a query it should refuse or answered one it should "
    "answer, else 0",
}
# An external judge's score `<name>` (declared with its range) is compared as `judge_<name>`.
JUDGE_PREFIX = "judge_"


def is_answer_metric(spec: str) -> bool:
    """A name `run.compare` and the gate read from answers.json instead of metrics.json."""
    name = str(spec)
    return name in ANSWER_METRICS or (
        name.startswith(JUDGE_PREFIX) and name[len(JUDGE_PREFIX) :].isidentifier()
    )
