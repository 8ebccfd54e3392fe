"""What every judge is: it grades (query, passage) pairs and says, per pair, its grade or why
it has none. The chat-model judge (`judge.openai`), the cross-encoder (`judge.cross_encoder`) and
the similarity judge (`judge.similarity`) implement `Judge`; the last two are `ScoreJudge`s, whose
grades are a score cut at thresholds. `judge.judging` runs one over a pool through the cache."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from retrieval_bench.config.judge import judge_flag
from retrieval_bench.errors import ConfigError
from retrieval_bench.judge.prompt import JUDGE_SCALE


@dataclass(frozen=True)
class Pair:
    """One pair to grade: the query, and the passage as the arms read it (title, newline,
    text)."""

    query_id: str
    passage_id: str
    query: str
    passage: str


@dataclass(frozen=True)
class Verdict:
    """A judge's answer for one pair. `grade` is the judge's own grade (0-3 for a chat model,
    the evaluation set's grade for a cross-encoder), None when the pair is unjudged, and then
    `unjudged` says why (`<kind>: <message>`). `raw` is what the model said (a chat answer's
    text, a cross-encoder's score); `cost` the call's token usage when the endpoint reported
    it; `cached` when the answer came from the cache, not from a call."""

    grade: int | None
    raw: str | float | None
    unjudged: str | None = None
    cost: dict[str, Any] | None = None
    cached: bool = False


Done = Callable[[int, Verdict], None]
# How a setting is named in a message: `--relevant-from` on the command line, or
# `benchmark.judge.relevant_from` in the monthly job's config.
Key = Callable[[str], str]


def cli_key(name: str) -> str:
    """The command-line flag of a judge setting (config.judge.judge_flag: `--judge` for kind)."""
    return judge_flag(name)


def config_key(prefix: str) -> Key:
    return lambda name: f"{prefix}.{name}"


class Judge(Protocol):
    kind: str
    model: str

    def describe(self) -> dict[str, Any]:
        """Who this judge is, for every output's header: kind, model, and its prompts' hashes
        or its thresholds."""

    def name_fields(self, pair: Pair) -> dict[str, Any]:
        """The judgment's name fields for `pair`: `judge`, `model`, and `prompt_sha256` or
        `thresholds` (what the import records, and what the cache key holds)."""

    def cache_key(self, pair: Pair) -> list[str]:
        """What identifies this judge's answer for `pair` (the cache hashes it)."""

    def from_cache(self, entry: dict[str, Any]) -> Verdict:
        """The verdict a cached entry holds."""

    def to_cache(self, verdict: Verdict) -> dict[str, Any] | None:
        """What to cache of a verdict (None: nothing, e.g. an unjudged pair, asked again)."""

    def judge(self, pairs: Sequence[Pair], done: Done) -> None:
        """Grade `pairs`, calling `done(i, verdict)` in the calling thread as each is known."""

    def to_scale(self, grade: int) -> int:
        """The judge's grade on the evaluation set's scale (what is imported as a label)."""


def scale_mapping(
    scale: Sequence[int], relevant_from: int, key: Key = cli_key
) -> Callable[[int], int]:
    """How a 0-3 grade becomes a grade of the evaluation set's `scale` (`--grades`): on 0,1,
    relevant (1) from `relevant_from` up; on 0,1,2,3 as it is. Other scales exit 2."""
    if tuple(scale) == JUDGE_SCALE:
        return lambda grade: grade
    if tuple(scale) == (0, 1):
        if relevant_from not in JUDGE_SCALE[1:]:
            raise ConfigError(key("relevant_from"), f"must be 1, 2 or 3, got {relevant_from}")
        return lambda grade: int(grade >= relevant_from)
    raise ConfigError(
        key("grades"),
        f"{','.join(map(str, scale))}: a 0-3 judge's grades map onto 0,1 (relevant from "
        f"{key('relevant_from')}) or 0,1,2,3",
    )


class ScoreJudge:
    """A judge whose own output is a score with no fixed meaning (a cross-encoder's logit, a
    cosine), cut into grades by thresholds t_1 <= ... <= t_M, one per grade above 0 of the
    evaluation set's scale: the grade is the number of thresholds the score reaches. Without
    thresholds every verdict carries the score and no grade (what `--calibrate` fits them on).
    Scores are cached, not grades, so new thresholds re-grade without scoring again."""

    kind: str
    model: str
    thresholds: list[float] | None

    def grade_of(self, score: float) -> int | None:
        if self.thresholds is None:
            return None
        return sum(score >= t for t in self.thresholds)

    def from_cache(self, entry: dict[str, Any]) -> Verdict:
        score = float(entry["score"])
        return Verdict(self.grade_of(score), score, cached=True)

    def to_cache(self, verdict: Verdict) -> dict[str, Any] | None:
        return None if verdict.raw is None else {"score": verdict.raw}

    def name_fields(self, pair: Pair) -> dict[str, Any]:
        return {"judge": self.kind, "model": self.model, "thresholds": self.thresholds}

    def to_scale(self, grade: int) -> int:
        return grade  # thresholds are on the evaluation set's scale already
