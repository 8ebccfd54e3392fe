"""`mixed_script`: each lexicon entity the query names written in Latin script, as users type a
name they know in English or leave an input method's pinyin uncommitted: the entity's own
Latin-script alias when the lexicon has one, else the pinyin romanisation of the name as typed
(pypinyin, toneless, syllables run together: 蜈支洲岛 -> wuzhizhoudao)."""

from __future__ import annotations

import random
from functools import lru_cache
from importlib import metadata

from retrieval_bench.perturb.base import PerturbSettings, Variant
from retrieval_bench.perturb.entities import EntityMentions
from retrieval_bench.records import EvalQuery

NO_LEXICON = "the dataset has no lexicon"
NO_ENTITY = "names no lexicon entity"
LEXICON, PYPINYIN = "lexicon", "pypinyin"


def is_latin(surface: str) -> bool:
    """A surface written in Latin script: some ASCII letter and nothing of another script
    (digits, spaces and ASCII punctuation allowed)."""
    return any(ch.isascii() and ch.isalpha() for ch in surface) and all(
        ch.isascii() for ch in surface
    )


@lru_cache(maxsize=65536)
def romanise(surface: str) -> str:
    """The toneless pinyin of `surface`, syllables run together; other characters kept (kept
    per surface, as `homophone.readings`)."""
    from pypinyin import lazy_pinyin

    return "".join(lazy_pinyin(surface))


class MixedScript:
    kind = "mixed_script"

    def __init__(self, settings: PerturbSettings) -> None:
        self.mentions = EntityMentions(settings.entities)

    def library(self) -> str:
        return f"lexicon Latin aliases, else pypinyin {metadata.version('pypinyin')}"

    def apply(self, query: EvalQuery, rng: random.Random) -> Variant | str:
        if not self.mentions.entities:
            return NO_LEXICON
        text = query.query
        spans = [s for s in self.mentions.find(text) if not is_latin(text[s.start : s.end])]
        if not spans:
            return NO_ENTITY
        pieces, changes, end = [], [], 0
        for span in spans:
            surface = text[span.start : span.end]
            entity = self.mentions.by_name[span.value]
            latin = [a for a in entity.aliases if is_latin(a)]
            new, source = (latin[0], LEXICON) if latin else (romanise(surface), PYPINYIN)
            pieces += [text[end : span.start], new]
            changes.append([span.start, span.end, surface, new, entity.name, source])
            end = span.end
        pieces.append(text[end:])
        return Variant("".join(pieces), {"changes": changes})
