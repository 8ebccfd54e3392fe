"""Judge a pool: every pair without a grade, through the cache, into a judgment file that
`python -m run.pool --import` reads.

The output is the pool's records (JSONL, the pool's order) with the judge's fields added
(`data.judgments.JUDGE_FIELDS`): `source: judge`, the judge's name (`judge`, `model`,
`prompt_sha256` of the prompt the pair got, or a cross-encoder's `thresholds`), `judge_grade`
(its own grade: 0-3 for a chat model), `grade` (that grade on the evaluation set's scale: what
the import makes the label), `raw_answer`, the call's `cost` when the endpoint reported usage,
`cached`, and for a pair it could not grade a null grade with the reason in `unjudged`.
A pool record a person already graded is not judged (import the pool itself for it) and left
out of the output.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrieval_bench.data.jsonl import check_fields
from retrieval_bench.data.judgments import ANNOTATION_FIELDS, JUDGE_SOURCE, annotation_rows
from retrieval_bench.errors import BenchError, DataError
from retrieval_bench.io.atomic import atomic_write_text
from retrieval_bench.io.strict_json import jsonl_text
from retrieval_bench.judge.base import Judge, Pair, Verdict
from retrieval_bench.judge.cache import JudgeCache

POOL_REQUIRED = ("query_id", "id", "query", "text")


class NothingJudged(BenchError):
    """Every pair failed: the judgments are written (each with its reason), exit 2."""


def read_pool(path: Path) -> tuple[list[dict[str, Any]], list[Pair], int]:
    """The pool's records still without a grade, their pairs, and how many a person had
    graded already (skipped). A record without a query or passage text fails with file:line."""
    records: list[dict[str, Any]] = []
    pairs: list[Pair] = []
    graded = 0
    for line, record in annotation_rows(path):
        check_fields(record, ANNOTATION_FIELDS, path, line)
        for key in POOL_REQUIRED:
            if not isinstance(record.get(key), str) or not record[key]:
                raise DataError(path, f"a pool record needs a non-empty string {key!r}", line)
        if record.get("grade") not in (None, ""):
            graded += 1
            continue
        title = record.get("title") or ""
        passage = f"{title}\n{record['text']}" if title else record["text"]
        records.append(record)
        pairs.append(Pair(record["query_id"], record["id"], record["query"], passage))
    return records, pairs, graded


def judge_pairs(pairs: Sequence[Pair], judge: Judge, cache: JudgeCache) -> list[Verdict]:
    """Each pair's verdict: from the cache when it holds one, else asked (and cached as it
    arrives, so a killed run loses no answer it got)."""
    verdicts: list[Verdict | None] = [None] * len(pairs)
    keys = [JudgeCache.key(judge.cache_key(pair)) for pair in pairs]
    todo: list[int] = []
    for i, key in enumerate(keys):
        entry = cache.get(key)
        if entry is None:
            todo.append(i)
        else:
            verdicts[i] = judge.from_cache(entry)

    def done(j: int, verdict: Verdict) -> None:
        i = todo[j]
        verdicts[i] = verdict
        entry = judge.to_cache(verdict)
        if entry is not None:
            cache.put(keys[i], entry)

    judge.judge([pairs[i] for i in todo], done)
    missing = [pairs[i].passage_id for i, v in enumerate(verdicts) if v is None]
    if missing:
        raise RuntimeError(f"the judge returned no verdict for {len(missing)} pairs")
    return [v for v in verdicts if v is not None]


@dataclass
class Tally:
    """What a judging run did: pairs graded, unjudged by reason, answered from the cache,
    and the token usage (and price) of the calls it made."""

    judged: int = 0
    unjudged: dict[str, int] = field(default_factory=dict)
    cached: int = 0
    skipped_graded: int = 0
    calls_with_usage: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usd: float | None = None

    def add(self, verdict: Verdict) -> None:
        if verdict.grade is None:
            kind = (verdict.unjudged or "unknown").split(":", 1)[0]
            self.unjudged[kind] = self.unjudged.get(kind, 0) + 1
        else:
            self.judged += 1
        if verdict.cached:
            self.cached += 1
            return
        if verdict.cost:
            self.calls_with_usage += 1
            self.prompt_tokens += int(verdict.cost.get("prompt_tokens") or 0)
            self.completion_tokens += int(verdict.cost.get("completion_tokens") or 0)
            if "usd" in verdict.cost:
                self.usd = (self.usd or 0.0) + float(verdict.cost["usd"])

    def lines(self) -> list[str]:
        total = self.judged + sum(self.unjudged.values())
        out = [f"judged {self.judged} of {total} pairs ({self.cached} answered from the cache)"]
        if self.unjudged:
            reasons = ", ".join(f"{r} {n}" for r, n in sorted(self.unjudged.items()))
            out.append(
                f"  unjudged (left unlabelled, never guessed): {sum(self.unjudged.values())} "
                f"({reasons})"
            )
        if self.skipped_graded:
            out.append(f"  not judged: {self.skipped_graded} pool records a person graded")
        if self.calls_with_usage:
            price = f", ${self.usd:.4f}" if self.usd is not None else ""
            out.append(
                f"  this run's calls: {self.prompt_tokens} prompt + {self.completion_tokens} "
                f"completion tokens{price}"
            )
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "judged": self.judged,
            "unjudged": dict(sorted(self.unjudged.items())),
            "cached": self.cached,
            "skipped_graded": self.skipped_graded,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "usd": self.usd,
        }


def judgment_record(
    record: dict[str, Any], pair: Pair, verdict: Verdict, judge: Judge
) -> dict[str, Any]:
    """The pool `record` with the judge's fields (module docstring)."""
    out = {key: value for key, value in record.items() if key != "grade"}
    out["grade"] = judge.to_scale(verdict.grade) if verdict.grade is not None else None
    out["source"] = JUDGE_SOURCE
    out.update(judge.name_fields(pair))
    out["judge_grade"] = verdict.grade
    out["raw_answer"] = verdict.raw
    out["cost"] = verdict.cost
    out["unjudged"] = verdict.unjudged
    out["cached"] = verdict.cached
    return out


def judge_pool(
    pool: Path, judge: Judge, cache: JudgeCache, out: Path
) -> tuple[list[dict[str, Any]], Tally]:
    """Judge `pool`'s ungraded pairs into the judgment file `out` (written whole). Every pair
    unjudged is NothingJudged (exit 2), after the file is written."""
    records, pairs, graded = read_pool(pool)
    verdicts = judge_pairs(pairs, judge, cache)
    tally = Tally(skipped_graded=graded)
    judged = []
    for record, pair, verdict in zip(records, pairs, verdicts, strict=True):
        tally.add(verdict)
        judged.append(judgment_record(record, pair, verdict, judge))
    atomic_write_text(out, jsonl_text(judged))
    if pairs and tally.judged == 0:
        reasons = ", ".join(f"{r} {n}" for r, n in sorted(tally.unjudged.items()))
        raise NothingJudged(
            f"the judge graded none of the {len(pairs)} pairs ({reasons}); {out} lists each "
            "with its reason: is the endpoint up, and is --model one it serves?"
        )
    return judged, tally
