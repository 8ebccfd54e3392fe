"""`homophone`: pinyin-input slips. A share `rate` of the query's replaceable characters is
replaced by another character read the same (pypinyin, tones ignored as pinyin input methods
ignore them), picked among the most frequent such characters (jieba's dictionary frequencies):
the first candidates an input method offers. A character's reading is read in context
(pypinyin's phrase dictionary: 重 in 重庆 is chong); a candidate's is its default reading.
Characters inside a lexicon entity are kept unless `entities_too`."""

from __future__ import annotations

import itertools
import math
import random
from functools import lru_cache
from importlib import metadata
from typing import Any

from retrieval_bench.io.user_cache import stored_or_built, user_cache_dir
from retrieval_bench.perturb.base import PerturbSettings, Variant, replace_positions
from retrieval_bench.perturb.entities import EntityMentions
from retrieval_bench.records import EvalQuery
from retrieval_bench.text.tokenizer import base_dictionary, base_dictionary_id

# How many of the most frequent homophones a slip picks among: the first candidates an input
# method shows (jieba's frequencies rank some rare characters high; past the third they show).
CANDIDATES = 3
NO_CANDIDATE = "no replaceable character has a homophone"


def unread(chunk: str) -> Any:
    """pypinyin's `errors` hook: one empty reading per character it cannot read (its stub
    declares a string; a list keeps one item per character)."""
    return [""] * len(chunk)


@lru_cache(maxsize=65536)
def readings(text: str) -> tuple[str, ...]:
    """Each character's toneless pinyin in context; '' for a character pypinyin does not read
    (Latin letters, digits, punctuation).

    Kept per text: a process perturbs the same queries again (each job of a robustness sweep,
    and `run.compare --judged-labels` scores each job under three label sets), and pypinyin's
    phrase lookup was most of a homophone variant's cost."""
    from pypinyin import lazy_pinyin

    out = lazy_pinyin(text, errors=unread)
    if len(out) != len(text):  # not one reading per character: read each alone
        out = [lazy_pinyin(ch, errors=unread)[0] for ch in text]
    return tuple(str(r) for r in out)


def build_homophones() -> dict[str, tuple[str, ...]]:
    """Toneless reading -> the characters whose default reading it is, most frequent first
    (jieba's dictionary frequency of the character as a word; ties by code point). Only
    characters jieba's dictionary holds: the ones people type."""
    from pypinyin import lazy_pinyin

    freq, _total = base_dictionary()
    frequency = {w: f for w, f in freq.items() if len(w) == 1 and f > 0}
    by_reading: dict[str, list[str]] = {}
    for ch in frequency:
        reading = lazy_pinyin(ch, errors=unread)[0]
        if reading:
            by_reading.setdefault(reading, []).append(ch)
    return {
        reading: tuple(sorted(chars, key=lambda c: (-frequency[c], c)))
        for reading, chars in by_reading.items()
    }


@lru_cache(maxsize=1)
def homophones() -> dict[str, tuple[str, ...]]:
    """`build_homophones`, kept in the user's cache (`stored_or_built`, named by pypinyin's
    version and jieba's dictionary): every process that perturbed queries built it, and called
    jieba's `initialize` to do so (0.34 s built against 0.005 s read, jieba aside:
    benchmarks/bench_start.py)."""
    name = f"pypinyin-{metadata.version('pypinyin')}-jieba-{base_dictionary_id()}.pickle"

    def whole(value: Any) -> bool:
        return isinstance(value, dict) and all(isinstance(v, tuple) for v in value.values())

    return stored_or_built(user_cache_dir() / "homophones" / name, build_homophones, whole)


class Homophone:
    kind = "homophone"

    def __init__(self, settings: PerturbSettings) -> None:
        self.rate = settings.rate
        self.entities_too = settings.entities_too
        self.mentions = EntityMentions(settings.entities)

    def library(self) -> str:
        return (
            f"pypinyin {metadata.version('pypinyin')}, jieba {metadata.version('jieba')} "
            f"frequencies (top {CANDIDATES}, rate {self.rate:g})"
        )

    def apply(self, query: EvalQuery, rng: random.Random) -> Variant | str:
        text = query.query
        kept = set() if self.entities_too else self.mentions.covered(text)
        table = homophones()
        options: dict[int, tuple[str, ...]] = {}
        reading = readings(text)
        for i, sound in enumerate(reading):
            if not sound or i in kept:
                continue
            others = (c for c in table.get(sound, ()) if c != text[i])
            candidates = tuple(itertools.islice(others, CANDIDATES))
            if candidates:
                options[i] = candidates
        if not options:
            return NO_CANDIDATE
        count = math.ceil(self.rate * len(options))
        positions = sorted(rng.sample(sorted(options), count))
        changes = [(i, rng.choice(options[i])) for i in positions]
        changed = replace_positions(text, changes)
        return Variant(
            changed,
            {
                "rate": self.rate,
                "replaceable": len(options),
                "changes": [[i, text[i], new, reading[i]] for i, new in changes],
            },
        )
