"""`spacing` / `unspacing`: word spacing as a user adds or drops it. `spacing` puts a space at
every boundary jieba (its own dictionary, HMM on: how a reader would split the words, not the
dataset's lexicon) finds between two words of letters, digits or characters; `unspacing`
removes every whitespace character (a query typed without the spaces of `GRB 090423`)."""

from __future__ import annotations

import random
import unicodedata
from functools import lru_cache
from importlib import metadata
from itertools import pairwise
from typing import Any

from retrieval_bench.perturb.base import Variant
from retrieval_bench.records import EvalQuery
from retrieval_bench.text.tokenizer import default_jieba

NO_BOUNDARY = "one word: no boundary to space"
NO_SPACE = "holds no whitespace"


def is_word_char(ch: str) -> bool:
    """A letter, digit or ideograph: not whitespace, punctuation or a symbol."""
    return not unicodedata.category(ch).startswith(("Z", "P", "S", "C"))


@lru_cache(maxsize=1)
def _default_jieba() -> Any:
    """One jieba of the default dictionary per process (`text.tokenizer.default_jieba`):
    `jieba.lcut`'s own tokenizer would read jieba's marshal cache on first use, the
    "jieba dictionary built" row of benchmarks/bench_start.py, in every perturbing process."""
    return default_jieba()


@lru_cache(maxsize=65536)
def jieba_words(text: str) -> tuple[str, ...]:
    """`jieba.lcut(text, HMM=True)`: jieba's default dictionary, HMM on. Kept per text, as
    `homophone.readings`: a process perturbs the same queries again."""
    return tuple(_default_jieba().lcut(text, HMM=True))


def spaced(text: str) -> tuple[str, int]:
    """`text` with a space at each jieba boundary between two word characters; how many."""
    words = jieba_words(text)
    out, added = [words[0]] if words else [], 0
    for before, word in pairwise(words):
        if is_word_char(before[-1]) and is_word_char(word[0]):
            out.append(" ")
            added += 1
        out.append(word)
    return "".join(out), added


class Spacing:
    kind = "spacing"

    def library(self) -> str:
        return f"jieba {metadata.version('jieba')} (default dictionary, HMM)"

    def apply(self, query: EvalQuery, rng: random.Random) -> Variant | str:
        text, added = spaced(query.query)
        if not added:
            return NO_BOUNDARY
        return Variant(text, {"spaces_added": added})


class Unspacing:
    kind = "unspacing"

    def library(self) -> str:
        return "str.isspace"

    def apply(self, query: EvalQuery, rng: random.Random) -> Variant | str:
        removed = [i for i, ch in enumerate(query.query) if ch.isspace()]
        if not removed:
            return NO_SPACE
        text = "".join(ch for ch in query.query if not ch.isspace())
        return Variant(text, {"removed_at": removed})
