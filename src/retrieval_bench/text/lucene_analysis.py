"""Lucene's analyzers for the project's own BM25 (`text.analyzer`): English and CJK bigrams.

What Elasticsearch and OpenSearch (and Anserini) index is Lucene's token stream, not jieba's
words, so a BM25 meant to stand in for them (`arms.bm25.variant=lucene`) has to see the same terms.
Two chains of Lucene 9.9.1 (the Lucene inside Anserini 1.7.1) are written out here:

- `english`: Lucene's EnglishAnalyzer, which is also Anserini's default analyzer: the
  StandardTokenizer, EnglishPossessiveFilter, LowerCaseFilter, StopFilter with Lucene's English
  stopword set, PorterStemFilter.
- `cjk_bigram`: Lucene's CJKAnalyzer (Anserini's `-language zh`, Elasticsearch's `cjk`): the
  StandardTokenizer, CJKWidthFilter, LowerCaseFilter, CJKBigramFilter, StopFilter with its own
  stopwords.

The StandardTokenizer is the JFlex grammar of `StandardTokenizerImpl.jflex` (UAX #29 word
breaks, with Lucene's rules for numbers, emoji, South-East Asian runs, and single Han and
Hiragana characters) transcribed rule for rule into one `regex` pattern matched leftmost-longest
(`(?p)`, POSIX), as JFlex matches; the rule a match belongs to (its token type, which the bigram
filter reads) is the first rule that matches all of it, as JFlex breaks ties. Lucene compiles the
grammar against Unicode 9 while `regex` carries a later Unicode, so characters assigned after
Unicode 9 may be tokenised where Lucene drops them. The Porter stemmer is NLTK's in its
MARTIN_EXTENSIONS mode, Martin Porter's reference implementation, which Lucene's PorterStemmer
is (NLTK's default mode is not; tests/unit/text/test_lucene_analysis.py holds its check).
Parity with Lucene's own token streams, produced by the real Lucene, is tested on the shipped
corpora and SciFact (tests/unit/text/test_lucene_analysis_parity.py).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import regex

from retrieval_bench.config.text import ANALYZERS
from retrieval_bench.text.lucene_unicode import AFTER_UNICODE_9, LUCENE_EMOJI_ONLY

MAX_TOKEN_LENGTH = 255
"""StandardTokenizer's default maxTokenLength: a longer token is cut into pieces of at most this
many UTF-16 units, each a token."""

# The grammar's macros (StandardTokenizerImpl.jflex), as `regex` groups: a character and the
# Extend, Format and ZWJ characters that follow it (UAX #29 WB4).
_EXT = r"[\p{WB=Format}\p{WB=Extend}\p{WB=ZWJ}]*"
_EXT_SANS_PRES = r"[[\p{WB=Format}\p{WB=Extend}\p{WB=ZWJ}]--[\uFE0E\uFE0F]]*"
_HANGUL = rf"(?:[\p{{Script=Hangul}}&&[\p{{WB=ALetter}}\p{{WB=Hebrew_Letter}}]]{_EXT})"
_AHLETTER = rf"(?:[\p{{WB=ALetter}}\p{{WB=Hebrew_Letter}}]{_EXT})"
_NUMERIC = rf"(?:[\p{{WB=Numeric}}[\p{{Block=HalfAndFullForms}}&&\p{{Nd}}]]{_EXT})"
_KATAKANA = rf"(?:\p{{WB=Katakana}}{_EXT})"
_MIDLETTER = rf"(?:[\p{{WB=MidLetter}}\p{{WB=MidNumLet}}\p{{WB=Single_Quote}}]{_EXT})"
_MIDNUMERIC = rf"(?:[\p{{WB=MidNum}}\p{{WB=MidNumLet}}\p{{WB=Single_Quote}}]{_EXT})"
_EXTENDNUMLET = rf"(?:\p{{WB=ExtendNumLet}}{_EXT})"
_HAN = rf"(?:\p{{Script=Han}}{_EXT})"
_HIRAGANA = rf"(?:\p{{Script=Hiragana}}{_EXT})"
_SINGLE_QUOTE = rf"(?:\p{{WB=Single_Quote}}{_EXT})"
_DOUBLE_QUOTE = rf"(?:\p{{WB=Double_Quote}}{_EXT})"
_HEBREW = rf"(?:\p{{WB=Hebrew_Letter}}{_EXT})"
_REGIONAL = rf"(?:\p{{WB=Regional_Indicator}}{_EXT})"
_COMPLEX = rf"(?:\p{{Line_Break=Complex_Context}}{_EXT})"

# Emoji (the grammar's emoji_sequence rule, after UTS #51).
_EMOJI_CHAR = (
    r"[\p{Extended_Pictographic}[\p{Emoji}--[\p{WB=Regional_Indicator}0-9#*"
    r"\u00A9\u00AE\u2122\u3030\u303D\p{Emoji_Modifier}]]]"
)
_EMOJI_SEQ = (
    rf"(?:\p{{WB=ZWJ}}*{_EMOJI_CHAR}{_EXT_SANS_PRES}\uFE0F?"
    rf"|(?:\p{{WB=ZWJ}}*\p{{Emoji_Modifier_Base}}{_EXT_SANS_PRES})?"
    rf"\p{{Emoji_Modifier}}{_EXT_SANS_PRES})"
)
_EMOJI_RULE = (
    rf"{_EMOJI_SEQ}(?:(?:\p{{WB=ZWJ}}{_EMOJI_SEQ})*|[\U000E0020-\U000E007E]+\U000E007F)"
    rf"|[0-9#*]{_EXT_SANS_PRES}\uFE0F?\u20E3{_EXT_SANS_PRES}"
    rf"|{_REGIONAL}{_REGIONAL}"
)
_NUMERIC_RULE = (
    rf"{_EXTENDNUMLET}*{_NUMERIC}(?:(?:{_EXTENDNUMLET}*|{_MIDNUMERIC}){_NUMERIC})*"
    rf"{_EXTENDNUMLET}*"
)
_HANGUL_RULE = rf"(?:{_HANGUL})+"
_KATAKANA_RULE = rf"(?:{_KATAKANA})+"
_WORD_UNIT = (
    rf"(?:{_KATAKANA}(?:{_EXTENDNUMLET}*{_KATAKANA})*"
    rf"|(?:{_HEBREW}(?:{_SINGLE_QUOTE}|{_DOUBLE_QUOTE}{_HEBREW})"
    rf"|{_NUMERIC}(?:(?:{_EXTENDNUMLET}*|{_MIDNUMERIC}){_NUMERIC})*"
    rf"|{_AHLETTER}(?:(?:{_EXTENDNUMLET}*|{_MIDLETTER}){_AHLETTER})*)+)"
)
_WORD_RULE = (
    rf"{_EXTENDNUMLET}*{_WORD_UNIT}(?:(?:{_EXTENDNUMLET})+{_WORD_UNIT})*{_EXTENDNUMLET}*"
)
_SOUTHEAST_ASIAN_RULE = rf"(?:{_COMPLEX})+"

# Token types, as StandardTokenizer.TOKEN_TYPES names them.
EMOJI = "<EMOJI>"
NUM = "<NUM>"
HANGUL = "<HANGUL>"
KATAKANA = "<KATAKANA>"
ALPHANUM = "<ALPHANUM>"
SOUTHEAST_ASIAN = "<SOUTHEAST_ASIAN>"
IDEOGRAPHIC = "<IDEOGRAPHIC>"
HIRAGANA = "<HIRAGANA>"

# The rules in the grammar's order: a tie in length goes to the earlier one.
_RULES = (
    (EMOJI, _EMOJI_RULE),
    (NUM, _NUMERIC_RULE),
    (HANGUL, _HANGUL_RULE),
    (KATAKANA, _KATAKANA_RULE),
    (ALPHANUM, _WORD_RULE),
    (SOUTHEAST_ASIAN, _SOUTHEAST_ASIAN_RULE),
    (IDEOGRAPHIC, _HAN),
    (HIRAGANA, _HIRAGANA),
)
# NUM, HANGUL and KATAKANA match subsets of what the word rule matches, so the longest match
# of all rules is the longest of the other five.
_LONGEST = (EMOJI, ALPHANUM, SOUTHEAST_ASIAN, IDEOGRAPHIC, HIRAGANA)
_RULE = dict(_RULES)
_POSIX = regex.compile(
    "(?p)(?:" + "|".join(f"(?:{_RULE[kind]})" for kind in _LONGEST) + ")", regex.VERSION1
)
# Leftmost-longest is slow (it explores every alternative), and the grammar is deterministic
# enough that the first match in this order is the longest wherever no emoji rule can start:
# the word, South-East Asian, Han and Hiragana rules start on disjoint characters, each makes
# one choice per character, and where a digit starts a keycap emoji the word rule takes the
# same characters (the keycap's marks are Extend characters). So the scan matches in this order
# and takes the leftmost-longest match only where a character that may start an emoji starts
# the match (tests compare the two on every shipped corpus).
_GROUPS = {"w": ALPHANUM, "c": SOUTHEAST_ASIAN, "h": IDEOGRAPHIC, "r": HIRAGANA, "e": EMOJI}
_FIRST_MATCH = regex.compile(
    "|".join(
        f"(?P<{group}>{_RULE[kind]})"
        for group, kind in (("w", ALPHANUM), ("c", SOUTHEAST_ASIAN), ("h", IDEOGRAPHIC),
                            ("r", HIRAGANA), ("e", EMOJI))
    ),
    regex.VERSION1,
)  # fmt: skip
_EMOJI_START = regex.compile(
    r"[[#*\p{Extended_Pictographic}\p{Emoji}\p{WB=ZWJ}\p{Emoji_Modifier_Base}"
    r"\p{Emoji_Modifier}\p{WB=Regional_Indicator}]--[0-9]]",
    regex.VERSION1,
)
_WHOLE = tuple((kind, regex.compile(f"(?:{rule})", regex.VERSION1)) for kind, rule in _RULES)
_NUM_WHOLE = regex.compile(f"(?:{_NUMERIC_RULE})", regex.VERSION1)
_CJK_TYPES = frozenset({IDEOGRAPHIC, HIRAGANA, KATAKANA, HANGUL})
_WORD_TYPES = (
    (NUM, _NUM_WHOLE),
    (HANGUL, regex.compile(f"(?:{_HANGUL_RULE})", regex.VERSION1)),
    (KATAKANA, regex.compile(f"(?:{_KATAKANA_RULE})", regex.VERSION1)),
)


def _scan_map() -> dict[int, int]:
    """What the scan sees instead of the characters where Lucene's Unicode differs from
    `regex`'s (lucene_unicode): a symbol `regex` knows as an emoji, or NUL, which no rule takes."""
    table: dict[int, int] = {}
    for first, last in AFTER_UNICODE_9:
        table.update(dict.fromkeys(range(first, last + 1), 0))
    for first, last in LUCENE_EMOJI_ONLY:
        table.update(dict.fromkeys(range(first, last + 1), 0x2665))  # BLACK HEART SUIT
    return table


_SCAN_MAP = _scan_map()


def _utf16_length(text: str) -> int:
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def _within_utf16(text: str, start: int, units: int) -> int:
    """The end (code points) of the longest run from `start` of at most `units` UTF-16 units."""
    end, used = start, 0
    while end < len(text):
        width = 2 if ord(text[end]) > 0xFFFF else 1
        if used + width > units:
            break
        used += width
        end += 1
    return end


def token_type(term: str) -> str:
    """The type JFlex gives a match: the first rule, in the grammar's order, that matches all
    of it."""
    for kind, rule in _WHOLE:
        if rule.fullmatch(term):
            return kind
    raise ValueError(f"not a StandardTokenizer token: {term!r}")


def _word_type(term: str) -> str:
    """The type of a word-rule match: NUM, HANGUL or KATAKANA where that narrower rule takes all
    of it (earlier in the grammar), else ALPHANUM."""
    if term.isascii():
        return NUM if _NUM_WHOLE.fullmatch(term) else ALPHANUM
    for kind, rule in _WORD_TYPES:
        if rule.fullmatch(term):
            return kind
    return ALPHANUM


def standard_tokens(text: str, with_types: bool = False) -> list[tuple[str, str, int, int]]:
    """Lucene's StandardTokenizer over `text`: (term, type, start, end) per token, offsets in
    code points; the type is only computed where `with_types` (else "")."""
    scan = text if text.isascii() else text.translate(_SCAN_MAP)
    out: list[tuple[str, str, int, int]] = []
    pos, n = 0, len(scan)
    while pos < n:
        restart = None
        for match in _FIRST_MATCH.finditer(scan, pos):
            start, end = match.span()
            kind = _GROUPS[match.lastgroup or "w"]
            if _EMOJI_START.match(scan, start):
                longest = _POSIX.match(scan, start)
                if longest is not None and longest.end() != end:
                    end, kind, restart = longest.end(), "", longest.end()
            long = end - start > MAX_TOKEN_LENGTH // 2
            if long and _utf16_length(scan[start:end]) > MAX_TOKEN_LENGTH:
                # The scanner's buffer holds MAX_TOKEN_LENGTH UTF-16 units: the longest match
                # inside it is the token, and the scan goes on after it.
                window = _within_utf16(scan, start, MAX_TOKEN_LENGTH)
                longest = _POSIX.match(scan, start, window)
                end = longest.end() if longest is not None else window
                kind, restart = "", end
            term = text[start:end]
            if with_types:
                if kind in ("", EMOJI):
                    kind = token_type(scan[start:end])
                elif kind == ALPHANUM:
                    kind = _word_type(scan[start:end])
            out.append((term, kind if with_types else "", start, end))
            if restart is not None:
                break
        else:
            break
        pos = restart
    return out


def _lowercase(term: str) -> str:
    """LowerCaseFilter: Java's Character.toLowerCase per code point (no context: a final sigma
    stays σ; İ becomes i), not Python's full case mapping."""
    if term.isascii():
        return term.lower()
    return "".join(_lower_char(ch) for ch in term)


@lru_cache(maxsize=4096)
def _lower_char(ch: str) -> str:
    lower = ch.lower()
    return lower if len(lower) == 1 else ch if ch != "\u0130" else "i"


ENGLISH_STOP_WORDS = frozenset(
    (
        "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is",
        "it", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there",
        "these", "they", "this", "to", "was", "will", "with",
    )
)
"""EnglishAnalyzer.ENGLISH_STOP_WORDS_SET."""

CJK_STOP_WORDS = frozenset(
    (
        "a", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
        "no", "not", "of", "on", "or", "s", "such", "t", "that", "the", "their", "then", "there",
        "these", "they", "this", "to", "was", "will", "with", "www",
    )
)
"""CJKAnalyzer's default stopwords (org/apache/lucene/analysis/cjk/stopwords.txt)."""

_APOSTROPHES = ("'", "\u2019", "\uff07")


def _possessive(term: str) -> str:
    """EnglishPossessiveFilter: a trailing 's (any of its apostrophes) removed."""
    if len(term) >= 2 and term[-1] in "sS" and term[-2] in _APOSTROPHES:
        return term[:-2]
    return term


@lru_cache(maxsize=1)
def _porter() -> Any:
    """NLTK's Porter stemmer in Martin Porter's reference mode (the algorithm Lucene's
    PorterStemmer implements, with its departures from the 1980 paper)."""
    from nltk.stem.porter import PorterStemmer

    return PorterStemmer(mode=PorterStemmer.MARTIN_EXTENSIONS)


class EnglishAnalyzer:
    """`text.analyzer=english`: Lucene's EnglishAnalyzer (module docstring). Each distinct
    token's stem is remembered: a corpus repeats its words."""

    name = "english"

    def __init__(self) -> None:
        self._stems: dict[str, str] = {}

    def __reduce__(self) -> tuple[Any, ...]:
        return (EnglishAnalyzer, ())

    def identity(self) -> dict[str, object]:
        """What changes the tokens (the token cache's key): the chain, `regex`'s Unicode data
        and NLTK's stemmer."""
        from importlib.metadata import version

        return {
            "tokenizer": "lucene_english",
            "lucene": "9.9.1",
            "version": 1,
            "regex": regex.__version__,
            "nltk": version("nltk"),
        }

    def tokenize(self, text: str) -> list[str]:
        stems, out = self._stems, []
        for term, _, _, _ in standard_tokens(text):
            term = _lowercase(_possessive(term))
            if term in ENGLISH_STOP_WORDS:
                continue
            stem = stems.get(term)
            if stem is None:
                # PorterStemmer leaves a word of fewer than 3 UTF-16 units as it is.
                stem = term if _utf16_length(term) < 3 else _porter().stem(term, False)
                if len(stems) < 500_000:
                    stems[term] = stem
            out.append(stem)
        return out


def _width(term: str) -> str:
    """CJKWidthFilter: fullwidth ASCII folded to ASCII, halfwidth katakana to fullwidth (a
    halfwidth voiced mark combined into the kana before it where one exists)."""
    if all(ord(ch) < 0xFF01 or ord(ch) > 0xFF9F for ch in term):
        return term
    chars = list(term)
    out: list[str] = []
    for ch in chars:
        code = ord(ch)
        if 0xFF01 <= code <= 0xFF5E:
            out.append(chr(code - 0xFEE0))
        elif 0xFF65 <= code <= 0xFF9F:
            if code in (0xFF9E, 0xFF9F) and out and _combine(out, code):
                continue
            out.append(chr(_KANA_NORM[code - 0xFF65]))
        else:
            out.append(ch)
    return "".join(out)


_KANA_NORM = (
    0x30FB, 0x30F2, 0x30A1, 0x30A3, 0x30A5, 0x30A7, 0x30A9, 0x30E3, 0x30E5, 0x30E7, 0x30C3,
    0x30FC, 0x30A2, 0x30A4, 0x30A6, 0x30A8, 0x30AA, 0x30AB, 0x30AD, 0x30AF, 0x30B1, 0x30B3,
    0x30B5, 0x30B7, 0x30B9, 0x30BB, 0x30BD, 0x30BF, 0x30C1, 0x30C4, 0x30C6, 0x30C8, 0x30CA,
    0x30CB, 0x30CC, 0x30CD, 0x30CE, 0x30CF, 0x30D2, 0x30D5, 0x30D8, 0x30DB, 0x30DE, 0x30DF,
    0x30E0, 0x30E1, 0x30E2, 0x30E4, 0x30E6, 0x30E8, 0x30E9, 0x30EA, 0x30EB, 0x30EC, 0x30ED,
    0x30EF, 0x30F3, 0x3099, 0x309A,
)  # fmt: skip
_KANA_COMBINE_VOICED = (
    78, 0, 0, 0, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 0,
    1, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 8, 8, 8, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
)  # fmt: skip
_KANA_COMBINE_HALF_VOICED = (
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 2, 0, 0, 2,
    0, 0, 2, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
)  # fmt: skip


def _combine(out: list[str], code: int) -> bool:
    """CJKWidthFilter.combine: the voiced (FF9E) or semi-voiced (FF9F) mark folded into the
    kana before it; False where that kana takes no such mark."""
    prev = ord(out[-1])
    if 0x30A6 <= prev <= 0x30FD:
        table = _KANA_COMBINE_HALF_VOICED if code == 0xFF9F else _KANA_COMBINE_VOICED
        combined = prev + table[prev - 0x30A6]
        if combined != prev:
            out[-1] = chr(combined)
            return True
    return False


class CJKBigramAnalyzer:
    """`text.analyzer=cjk_bigram`: Lucene's CJKAnalyzer (module docstring): runs of adjacent
    Han, Hiragana, Katakana and Hangul tokens become overlapping bigrams (a lone character is
    its own token), everything else passes through lower-cased, then the stopwords go."""

    name = "cjk_bigram"

    def __reduce__(self) -> tuple[Any, ...]:
        return (CJKBigramAnalyzer, ())

    def identity(self) -> dict[str, object]:
        """What changes the tokens: the chain and `regex`'s Unicode data."""
        return {
            "tokenizer": "lucene_cjk_bigram",
            "lucene": "9.9.1",
            "version": 1,
            "regex": regex.__version__,
        }

    def tokenize(self, text: str) -> list[str]:
        out: list[str] = []
        run: list[str] = []  # the code points of the current run of adjacent CJK tokens
        run_end = 0

        def flush() -> None:
            if len(run) == 1:
                out.append(run[0])
            else:
                out.extend(run[i] + run[i + 1] for i in range(len(run) - 1))
            run.clear()

        for term, kind, start, end in standard_tokens(text, with_types=True):
            term = _lowercase(_width(term))
            if kind in _CJK_TYPES:
                # CJKBigramFilter continues a run with a CJK token that starts where the run's
                # last one ended, and starts a new run otherwise.
                if run and start != run_end:
                    flush()
                run.extend(term)
                run_end = end
                continue
            # Any other token ends the run (the next CJK token cannot touch it): the run's
            # bigrams, or its lone character, come before it, as the filter emits them.
            if run:
                flush()
            out.append(term)
        if run:
            flush()
        return [t for t in out if t not in CJK_STOP_WORDS]


def analyzer(name: str) -> EnglishAnalyzer | CJKBigramAnalyzer:
    """The Lucene analyzer `text.analyzer` names (not `jieba`, the project's tokenizer)."""
    if name == "english":
        return EnglishAnalyzer()
    if name == "cjk_bigram":
        return CJKBigramAnalyzer()
    raise ValueError(f"{name!r} is not a Lucene analyzer; text.analyzer is one of {ANALYZERS}")
