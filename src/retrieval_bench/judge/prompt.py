"""The relevance prompt a chat model judges with, and how its answer becomes a grade.

The prompt is UMBRELA's (Upadhyay et al., 2024: the open reproduction of Bing's relevance
assessor that TREC's RAG track uses), on its 0-3 scale: 0 the passage has nothing to do with
the query, 1 related but no answer, 2 some answer (unclear, or among other matter), 3 dedicated
to the query with the exact answer. Two are shipped as files, English and a Chinese rendering
of the same instructions (`prompts/umbrela.{en,zh}.txt`); either can be replaced with a file of
one's own (`--prompt-en`, `--prompt-zh`). A prompt holds `{query}` and `{passage}` where the
pair's texts go, and asks for the answer as `##final score: N`.

Which prompt a pair gets is chosen by its text (`language_of`): Chinese when at least
`HAN_SHARE` of the letters of the query and passage are Han characters, else English. Each
prompt's sha256 is written into every judgment it produced and is part of the judge cache's
key, so an edited prompt is never mistaken for the old one.

An answer is a grade when it holds `##final score: N` (any case, a full-width colon too) with
N in 0..3, every such line agreeing; or when the whole answer is that one digit. Anything else
is not a grade (`NotAGrade`, with the answer quoted): the pair is asked again, and when no
attempt answers with a grade it stays unjudged with that reason. Nothing is guessed from the
prose.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from retrieval_bench.errors import ConfigError

JUDGE_SCALE = (0, 1, 2, 3)
HAN_SHARE = 0.3
PLACEHOLDERS = ("{query}", "{passage}")
_SHIPPED = {"en": "umbrela.en.txt", "zh": "umbrela.zh.txt"}
_FINAL = re.compile(r"##\s*final\s*score\s*[:：]\s*([0-9]+)", re.IGNORECASE)
ANSWER_SNIPPET = 120


class NotAGrade(ValueError):
    """A model's answer that holds no grade of the scale."""


@dataclass(frozen=True)
class Prompt:
    """One prompt's text, where it came from and its sha256 (hex)."""

    language: str
    text: str
    origin: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    def render(self, query: str, passage: str) -> str:
        return self.text.replace("{query}", query).replace("{passage}", passage)


def shipped_prompt(language: str) -> Prompt:
    """The prompt this package ships for `language` (`en` or `zh`)."""
    name = _SHIPPED[language]
    text = (resources.files("retrieval_bench.judge") / "prompts" / name).read_text("utf-8")
    return Prompt(language, text, f"shipped {name}")


def load_prompt(language: str, path: str | Path | None, flag: str) -> Prompt:
    """The prompt for `language` from `path` (the command's `flag`), or the shipped one. A
    missing or unreadable file, or one without both placeholders, exits 2 naming the flag."""
    if path is None:
        return shipped_prompt(language)
    file = Path(path)
    if not file.is_file():
        raise ConfigError(flag, f"prompt file {file} does not exist")
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(flag, f"cannot read prompt file {file}: {exc}") from None
    missing = [p for p in PLACEHOLDERS if p not in text]
    if missing:
        raise ConfigError(
            flag, f"prompt file {file} lacks {' and '.join(missing)} (where the pair's texts go)"
        )
    return Prompt(language, text, str(file))


def language_of(query: str, passage: str) -> str:
    """`zh` when Han characters are at least HAN_SHARE of the letters, else `en`."""
    letters = [c for c in query + passage if c.isalpha()]
    if not letters:
        return "en"
    han = sum(1 for c in letters if unicodedata.name(c, "").startswith("CJK UNIFIED"))
    return "zh" if han >= HAN_SHARE * len(letters) else "en"


def parse_grade(answer: str) -> int:
    """The grade an answer gives (module docstring), or NotAGrade."""
    found = {int(m) for m in _FINAL.findall(answer)}
    stripped = answer.strip()
    if not found and stripped.isdigit() and len(stripped) == 1:
        found = {int(stripped)}
    snippet = stripped[:ANSWER_SNIPPET]
    if not found:
        raise NotAGrade(f"no '##final score: N' in the answer: {snippet!r}")
    if len(found) > 1:
        raise NotAGrade(f"the answer gives several grades {sorted(found)}: {snippet!r}")
    grade = found.pop()
    if grade not in JUDGE_SCALE:
        raise NotAGrade(f"grade {grade} is outside the scale 0-3: {snippet!r}")
    return grade
