"""`fullwidth` / `halfwidth`: Unicode's width forms (the `<wide>` compatibility decompositions of
the Unicode database, through `unicodedata`): ASCII letters, digits and punctuation typed in an
IME's full-width mode, or full-width forms (the Chinese comma and question mark among them)
typed half-width."""

from __future__ import annotations

import random
import unicodedata
from functools import lru_cache

from retrieval_bench.perturb.base import Variant
from retrieval_bench.records import EvalQuery

NO_ASCII = "no ASCII letter, digit or punctuation to widen"
NO_WIDE = "no full-width form to narrow"


@lru_cache(maxsize=1)
def wide_forms() -> dict[str, str]:
    """Every character whose compatibility decomposition is `<wide> X`, mapped from X: the
    Unicode database's own table of full-width forms."""
    table: dict[str, str] = {}
    for code in range(0x10000):  # every <wide> form lies in the BMP
        decomposition = unicodedata.decomposition(chr(code))
        if decomposition.startswith("<wide> ") and len(decomposition.split()) == 2:
            table[chr(int(decomposition.split()[1], 16))] = chr(code)
    return table


def _changes(text: str, table: dict[str, str]) -> list[list[object]]:
    return [[i, ch, table[ch]] for i, ch in enumerate(text) if ch in table]


class FullWidth:
    """ASCII letters, digits and punctuation (U+0021..U+007E) to their full-width forms."""

    kind = "fullwidth"

    def library(self) -> str:
        return f"unicodedata (Unicode {unicodedata.unidata_version}) <wide> forms"

    def apply(self, query: EvalQuery, rng: random.Random) -> Variant | str:
        table = {a: w for a, w in wide_forms().items() if "!" <= a <= "~"}
        changes = _changes(query.query, table)
        if not changes:
            return NO_ASCII
        text = "".join(table.get(ch, ch) for ch in query.query)
        return Variant(text, {"changes": changes})


class HalfWidth:
    """Every full-width form (letters, digits, the Chinese comma, question mark, ...) to the
    character it is a wide form of."""

    kind = "halfwidth"

    def library(self) -> str:
        return f"unicodedata (Unicode {unicodedata.unidata_version}) <wide> forms"

    def apply(self, query: EvalQuery, rng: random.Random) -> Variant | str:
        table = {w: a for a, w in wide_forms().items()}
        changes = _changes(query.query, table)
        if not changes:
            return NO_WIDE
        text = "".join(table.get(ch, ch) for ch in query.query)
        return Variant(text, {"changes": changes})
