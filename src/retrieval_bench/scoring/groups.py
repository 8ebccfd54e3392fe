"""Group-by values (`scoring.group_by`): break every metric down beyond the query type.

Each field maps every query to exactly one string, so a field's groups partition the evaluation
set: their scored and excluded counts add up to the overall ones. Fields:

- `meta.<name>`: the field on the query's relevant passages (grade > 0): its value when they
  all agree, "(mixed)" when they differ (a query needing a pdf and an xlsx passage says
  little about either kind alone, and joining the values would make a group per
  combination); a list-valued field contributes each element; a relevant passage without the
  field (or absent from the corpus) contributes "(missing)"; a query without relevant
  passages (no_answer, unlabelled) is "(no relevant)".
- a query field: `user_role`, `label_status`, `expected_cities`, `expected_entities`,
  `negative_entities` (lists joined with "+"; empty or absent is "(missing)").
- `query_length`: characters that carry meaning (whitespace, punctuation and symbols do not
  count), bucketed `00-10`, `11-20`, `21-30`, `31+` (names sort in length order).

Each field becomes `by_<field>` in every family's result, e.g. `by_meta.file_type`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from retrieval_bench.errors import ConfigError
from retrieval_bench.records import EvalQuery, Passage
from retrieval_bench.scoring.aggregate import MISSING_GROUP
from retrieval_bench.text.tokenizer import query_length

KEY = "scoring.group_by"
META_PREFIX = "meta."
QUERY_LENGTH = "query_length"
QUERY_FIELDS = (
    "user_role",
    "label_status",
    "expected_cities",
    "expected_entities",
    "negative_entities",
)
NO_RELEVANT = "(no relevant)"
MIXED = "(mixed)"
LENGTH_BUCKETS = ((10, "00-10"), (20, "11-20"), (30, "21-30"))
LONGEST_BUCKET = "31+"


def check_field(name: str) -> None:
    """ConfigError unless `name` is a group-by field this module knows how to fill."""
    if name.startswith(META_PREFIX) and len(name) > len(META_PREFIX):
        return
    if name in QUERY_FIELDS or name == QUERY_LENGTH:
        return
    known = ", ".join([f"{META_PREFIX}<field>", *QUERY_FIELDS, QUERY_LENGTH])
    hint = (
        " (query types are always broken down: by_type)" if name in ("type", "query_type") else ""
    )
    raise ConfigError(KEY, f"unknown field {name!r}; use one of: {known}{hint}")


def length_bucket(length: int) -> str:
    for upper, name in LENGTH_BUCKETS:
        if length <= upper:
            return name
    return LONGEST_BUCKET


def _join(values: Sequence[Any]) -> str:
    distinct = sorted({str(v) for v in values})
    return "+".join(distinct) if distinct else MISSING_GROUP


def meta_value(name: str, query: EvalQuery, meta: Mapping[str, Mapping[str, Any]]) -> str:
    """The `meta.<name>` group of one query (rules in the module docstring)."""
    relevant = query.relevant_ids
    if not relevant:
        return NO_RELEVANT
    values: list[Any] = []
    for pid in relevant:
        value = meta.get(pid, {}).get(name)
        if value is None or value == []:
            values.append(MISSING_GROUP)
        elif isinstance(value, (list, tuple)):
            values.extend(value)
        else:
            values.append(value)
    distinct = {str(v) for v in values}
    return distinct.pop() if len(distinct) == 1 else MIXED


def query_value(name: str, query: EvalQuery) -> str:
    if name == QUERY_LENGTH:
        return length_bucket(query_length(query.query))
    value = getattr(query, name)
    if value is None:
        return MISSING_GROUP
    if isinstance(value, tuple):
        return _join(value)
    return str(value)


def build_group_by(
    fields: Sequence[str], queries: Sequence[EvalQuery], passages: Sequence[Passage]
) -> dict[str, dict[str, str]]:
    """{field: {query id: group}} for every configured field; a `meta.` field that no passage
    carries is a ConfigError (almost always a typo)."""
    meta = {p.id: p.meta for p in passages}
    out: dict[str, dict[str, str]] = {}
    for name in dict.fromkeys(fields):
        check_field(name)
        if name.startswith(META_PREFIX):
            field = name[len(META_PREFIX) :]
            if not any(field in m for m in meta.values()):
                raise ConfigError(KEY, f"no passage of the corpus has meta.{field}")
            out[name] = {q.query_id: meta_value(field, q, meta) for q in queries}
        else:
            out[name] = {q.query_id: query_value(name, q) for q in queries}
    return out
