"""Reading an answers file: one JSON object a line, checked as the dataset files are.

`{"query_id", "answer", "citations"?: [ids], "refused"?: bool, "scores"?: {name: number}}`.

Refused with the file and line (DataError, exit 2), because nothing read from the file could be
trusted: malformed JSON, an unknown field (a typo such as `citation` would drop every citation
silently), a field of the wrong type, a query answered twice, or a file none of whose answers is
for a query of the job. Counted and reported, the rest of the file still scored: an answer for
a query the job does not know, a judge score that is NaN, null or outside its declared range, a
score name not declared (`AnswerOptions.judge_ranges`).

Citations are the `citations` list when a line gives one (an empty list: it cites nothing),
else what `AnswerOptions.citation_pattern` finds in the answer text: by default the contents of
`[...]` or `【...】`, split at commas and semicolons, so `[report.pdf]`, `[p12, p13]` and
`【sanya-xidao】` are citations. Each is mapped to passages by `CitationMap`.

Whether an answer's citations are known, one rule (`AnswersInput.citations_known`): a line
with a `citations` list: known (the list); a refusal without one: known, it cites nothing; any
other line: read by the pattern, known when the pattern matched in at least one of the answers
it reads. When it matched in none of them the pattern does not fit the generator's style, and
those answers' citations are unknown: excluded from every citation metric (`citations_unknown`),
never scored 0, and the warning gives their count.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from retrieval_bench.data.jsonl import check_fields, read_jsonl
from retrieval_bench.errors import ConfigError, DataError
from retrieval_bench.records import Passage

FIELDS = ("query_id", "answer", "citations", "refused", "scores")
DEFAULT_CITATION_PATTERN = r"\[([^\[\]\n]+)\]|【([^【】\n]+)】"
# One bracket may cite several sources: `[a.pdf, b.pdf]`.
_SPLIT = re.compile(r"\s*[,;，；、]\s*")
# The scores RAGAS and similar judges report, each in [0, 1]; others are declared with their
# range (`--judge NAME=LOW:HIGH`).
DEFAULT_JUDGE_RANGES: dict[str, tuple[float, float]] = {
    "faithfulness": (0.0, 1.0),
    "answer_relevancy": (0.0, 1.0),
    "answer_correctness": (0.0, 1.0),
    "context_precision": (0.0, 1.0),
    "context_recall": (0.0, 1.0),
}


@dataclass(frozen=True)
class AnswerOptions:
    """How an answers file is read: the citation pattern and each judge score's range."""

    citation_pattern: str = DEFAULT_CITATION_PATTERN
    judge_ranges: Mapping[str, tuple[float, float]] = field(
        default_factory=lambda: dict(DEFAULT_JUDGE_RANGES)
    )

    def compiled(self) -> re.Pattern[str]:
        try:
            return re.compile(self.citation_pattern)
        except re.error as exc:
            raise ConfigError(
                "--citation-pattern",
                f"{self.citation_pattern!r} is not a regular expression: {exc}",
            ) from None

    def validate(self) -> None:
        self.compiled()
        for name, (low, high) in self.judge_ranges.items():
            if not name.isidentifier():
                raise ConfigError("--judge", f"{name!r} is not a score name (letters, digits, _)")
            if not (math.isfinite(low) and math.isfinite(high) and low < high):
                raise ConfigError("--judge", f"{name}: range {low}:{high} is not LOW < HIGH")


@dataclass
class Answer:
    """One line of the answers file, read."""

    line: int
    query_id: str
    text: str
    citations: list[str]
    # "given" (the line's `citations`), "refused" (a refusal without a list: cites nothing) or
    # "pattern" (found in the text).
    cited_by: str
    refused: bool
    scores: dict[str, float]


@dataclass
class AnswersInput:
    """The usable answers, and every problem counted on the way (`problems()`)."""

    path: Path
    answers: dict[str, Answer]
    lines: int
    unknown_queries: list[tuple[int, str]] = field(default_factory=list)
    # score name -> [(line, query id, value as written)]
    out_of_range: dict[str, list[tuple[int, str, Any]]] = field(default_factory=dict)
    not_a_number: dict[str, list[tuple[int, str, Any]]] = field(default_factory=dict)
    undeclared: dict[str, int] = field(default_factory=dict)
    # Answers whose citations come from the pattern, and how many of them it matched in.
    pattern_used: int = 0
    pattern_matched: int = 0
    # The job's queries no line answers (excluded as not_in_answers, never scored 0).
    missing: list[str] = field(default_factory=list)

    def citations_known(self, query_id: str) -> bool:
        """Whether the answer to `query_id` has known citations (module docstring): given, a
        refusal, or read by a pattern that matched in at least one answer."""
        return self.answers[query_id].cited_by != "pattern" or self.pattern_matched > 0

    def problems(self) -> dict[str, Any]:
        """What was counted rather than refused, for answers.json and the report."""
        out: dict[str, Any] = {}
        if self.unknown_queries:
            out["unknown_queries"] = {
                "count": len(self.unknown_queries),
                "examples": [f"line {n}: {q}" for n, q in self.unknown_queries[:5]],
            }
        for key, found in (("out_of_range", self.out_of_range), ("nan", self.not_a_number)):
            if found:
                out[f"judge_{key}"] = {
                    name: {
                        "count": len(rows),
                        "examples": [f"line {n}: {q} = {v!r}" for n, q, v in rows[:5]],
                    }
                    for name, rows in sorted(found.items())
                }
        if self.undeclared:
            out["judge_undeclared"] = dict(sorted(self.undeclared.items()))
        if self.pattern_used and not self.pattern_matched:
            out["pattern_matched_nothing"] = (
                f"the citation pattern matched in none of the {self.pattern_used} answers "
                "without a `citations` list: their citations are unknown, so they are excluded "
                "from every citation metric (citations_unknown), not scored 0"
            )
        if self.missing:
            out["not_in_answers"] = {
                "count": len(self.missing),
                "examples": self.missing[:5],
            }
        return out


def extract_citations(text: str, pattern: re.Pattern[str]) -> list[str]:
    """Each citation the pattern finds in `text`, in order, as written (first non-empty group,
    else the whole match; split at commas and semicolons)."""
    found: list[str] = []
    for match in pattern.finditer(text):
        groups = [g for g in match.groups() if g]
        body = groups[0] if groups else match.group(0)
        found += [part for part in _SPLIT.split(body.strip()) if part]
    return found


def read_answers(path: Path, query_ids: Collection[str], options: AnswerOptions) -> AnswersInput:
    """The answers of `path` for the queries `query_ids` (module docstring for what is refused
    and what is counted)."""
    pattern = options.compiled()
    known = set(query_ids)
    seen: dict[str, int] = {}
    out = AnswersInput(path, {}, 0)
    for number, record in read_jsonl(path):
        out.lines += 1
        check_fields(record, FIELDS, path, number)
        qid = record.get("query_id")
        if not isinstance(qid, str) or not qid.strip():
            raise DataError(
                path, f"field 'query_id' must be a non-empty string, got {qid!r}", number
            )
        if qid in seen:
            raise DataError(
                path, f"query {qid!r} answered twice (first on line {seen[qid]})", number
            )
        seen[qid] = number
        text = record.get("answer")
        if not isinstance(text, str):
            raise DataError(path, "field 'answer' must be a string (empty when refused)", number)
        refused = record.get("refused", False)
        if not isinstance(refused, bool):
            raise DataError(path, f"field 'refused' must be true or false, got {refused!r}", number)
        citations = record.get("citations")
        if citations is not None and (
            not isinstance(citations, list) or not all(isinstance(c, str) for c in citations)
        ):
            raise DataError(path, "field 'citations' must be a list of strings", number)
        scores = record.get("scores", {})
        if not isinstance(scores, dict):
            raise DataError(path, "field 'scores' must be an object {name: number}", number)
        if qid not in known:
            out.unknown_queries.append((number, qid))
            continue
        if citations is None and refused:
            cited_by, cited = "refused", []
        elif citations is None:
            cited_by, cited = "pattern", extract_citations(text, pattern)
            out.pattern_used += 1
            out.pattern_matched += bool(cited)
        else:
            cited_by, cited = "given", [c.strip() for c in citations if c.strip()]
        out.answers[qid] = Answer(
            number, qid, text, cited, cited_by, refused, _scores(out, scores, number, qid, options)
        )
    out.missing = [q for q in query_ids if q not in out.answers]
    if not out.lines:
        raise DataError(path, "holds no answer")
    if not out.answers:
        example = out.unknown_queries[0][1] if out.unknown_queries else "?"
        raise DataError(
            path,
            f"none of its {out.lines} answers is for a query of the job (e.g. {example!r}): "
            "answers of another evaluation set?",
            out.unknown_queries[0][0] if out.unknown_queries else None,
        )
    return out


def _scores(
    out: AnswersInput, scores: Mapping[str, Any], line: int, qid: str, options: AnswerOptions
) -> dict[str, float]:
    """The line's usable judge scores; the others counted in `out`. A string or a list is a
    malformed line (refused), a NaN or null a score the judge failed to give (counted)."""
    usable: dict[str, float] = {}
    for name, value in scores.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise DataError(out.path, f"score {name!r} must be a number, got {value!r}", line)
        if name not in options.judge_ranges:
            out.undeclared[name] = out.undeclared.get(name, 0) + 1
            continue
        if value is None or math.isnan(value):
            out.not_a_number.setdefault(name, []).append((line, qid, value))
            continue
        low, high = options.judge_ranges[name]
        if not low <= value <= high:
            out.out_of_range.setdefault(name, []).append((line, qid, value))
            continue
        usable[name] = float(value)
    return usable


class CitationMap:
    """A citation as written -> the passages it names: a passage id, else a title, else a
    `doc_id`, else (a file name such as `report.pdf`) a title or `doc_id` equal to its stem."""

    def __init__(self, passages: Sequence[Passage]) -> None:
        self.ids = {p.id for p in passages}
        self.by_title: dict[str, list[str]] = {}
        self.by_doc: dict[str, list[str]] = {}
        for p in passages:
            if p.title:
                self.by_title.setdefault(p.title.strip(), []).append(p.id)
            if p.doc_id:
                self.by_doc.setdefault(p.doc_id, []).append(p.id)

    def resolve(self, citation: str) -> list[str]:
        """The passage ids `citation` names; empty when it names none (unmapped)."""
        if citation in self.ids:
            return [citation]
        for key in (citation, PurePosixPath(citation).stem):
            found = self.by_title.get(key) or self.by_doc.get(key)
            if found:
                return list(found)
        return []
