"""Each perturbation kind recomputed from its original with the library it names (OpenCC,
pypinyin, jieba, unicodedata), independently of the code that made the variant: what the
perturbation tests check every variant against (tests/unit/perturb/)."""

from __future__ import annotations

import unicodedata
from itertools import pairwise
from pathlib import Path

import jieba
import opencc

from retrieval_bench.data.passages import load_lexicon

ROOT = Path(__file__).resolve().parents[2]
TRAVEL_CORPUS = ROOT / "corpus" / "travel"


def _opencc(config: str):  # type: ignore[no-untyped-def]
    return lambda before, after, change: opencc.OpenCC(config).convert(before) == after


def _homophone(before: str, after: str, change: dict) -> bool:  # type: ignore[type-arg]
    from pypinyin import lazy_pinyin  # here, not at collection: ~0.3 s of every xdist worker

    chars = list(before)
    context = lazy_pinyin(before, errors=lambda s: [""] * len(s))
    jieba.initialize()
    for position, old, new, reading in change["changes"]:
        assert before[position] == old and new != old
        assert context[position] == reading, "the original's reading in context"
        assert lazy_pinyin(new)[0] == reading, f"{new} is not read {reading}"
        assert jieba.dt.FREQ.get(new, 0) > 0, "a character people type"
        chars[position] = new
    assert len(change["changes"]) >= 1
    return "".join(chars) == after


def _wide(to_wide: bool):  # type: ignore[no-untyped-def]
    def check(before: str, after: str, change: dict) -> bool:  # type: ignore[type-arg]
        chars = list(before)
        for position, old, new in change["changes"]:
            narrow, wide = (old, new) if to_wide else (new, old)
            assert unicodedata.decomposition(wide) == f"<wide> {ord(narrow):04X}"
            chars[position] = new
        return "".join(chars) == after

    return check


def _mixed_script(before: str, after: str, change: dict) -> bool:  # type: ignore[type-arg]
    from pypinyin import lazy_pinyin  # as in _homophone

    lexicon = {e.name: e for e in load_lexicon(TRAVEL_CORPUS / "lexicon.jsonl")}
    pieces, end = [], 0
    for start, stop, surface, new, entity, source in change["changes"]:
        assert before[start:stop] == surface
        assert surface in (entity, *lexicon[entity].aliases)
        if source == "pypinyin":
            assert new == "".join(lazy_pinyin(surface))
        else:
            assert new in lexicon[entity].aliases
        pieces += [before[end:start], new]
        end = stop
    return "".join([*pieces, before[end:]]) == after


def _spacing(before: str, after: str, change: dict) -> bool:  # type: ignore[type-arg]
    words = jieba.lcut(before, HMM=True)
    out = words[0]
    for prev, word in pairwise(words):
        if unicodedata.category(prev[-1])[0] not in "ZPSC" and (
            unicodedata.category(word[0])[0] not in "ZPSC"
        ):
            out += " "
        out += word
    return out == after


RECOMPUTE = {
    "traditional": _opencc("s2t"),
    "simplified": _opencc("t2s"),
    "homophone": _homophone,
    "fullwidth": _wide(True),
    "halfwidth": _wide(False),
    "mixed_script": _mixed_script,
    "spacing": _spacing,
    "unspacing": lambda before, after, change: "".join(before.split()) == after,
    "truncate": lambda before, after, change: before[: change["chars"]].rstrip() == after,
}
