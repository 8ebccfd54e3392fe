"""Tokenisation for BM25 and the query parser: jieba with the dataset's entity lexicon."""

from __future__ import annotations

import hashlib
import json
import logging
import re
import unicodedata
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from retrieval_bench.config.text import TextConfig
from retrieval_bench.io.user_cache import stored_or_built, user_cache_dir
from retrieval_bench.records import Entity


@lru_cache(maxsize=1)
def _jieba() -> Any:
    """jieba, imported on first tokenisation (not with the config schema that holds
    TextConfig), its start-up chatter silenced."""
    import jieba

    jieba.setLogLevel(logging.WARNING)
    return jieba


@lru_cache(maxsize=1)
def base_dictionary_id() -> str:
    """jieba's version and the hash of its default dictionary file: what `base_dictionary`
    (and whatever a store builds from it) depends on."""
    jieba = _jieba()
    default = Path(jieba.__file__).with_name("dict.txt")  # jieba's DEFAULT_DICT_NAME
    digest = hashlib.sha256(default.read_bytes()).hexdigest()[:16]
    return f"{getattr(jieba, '__version__', 'unknown')}-{digest}"


@lru_cache(maxsize=1)
def base_dictionary() -> tuple[dict[str, int], int]:
    """jieba's default prefix dictionary (FREQ) and total, read once per process: each
    Tokenizer starts from a copy (~20 ms) instead of jieba's own reload (~1 s).

    Kept in the user's cache as built by jieba (`stored_or_built`, named by jieba's version
    and its dictionary file's hash): it unpickles in 0.2 s where jieba's own `initialize`
    reads its marshal cache file in 0.7-0.8 s, which every process that tokenises paid."""
    jieba = _jieba()
    path = user_cache_dir() / "jieba-dictionary" / f"{base_dictionary_id()}.pickle"

    def build() -> tuple[dict[str, int], int]:
        base = jieba.Tokenizer()
        base.initialize()
        return base.FREQ, base.total

    def whole(value: Any) -> bool:
        return (
            isinstance(value, tuple)
            and len(value) == 2
            and isinstance(value[0], dict)
            and isinstance(value[1], int)
        )

    return stored_or_built(path, build, whole)


def default_jieba() -> Any:
    """A new jieba Tokenizer of jieba's default dictionary, started from a copy of
    `base_dictionary` (what its `initialize()` would set, without jieba's own reload): it cuts
    as `jieba.lcut` does, and words added to it change only its own copy."""
    tokenizer = _jieba().Tokenizer()
    freq, total = base_dictionary()
    tokenizer.FREQ, tokenizer.total = dict(freq), total
    tokenizer.initialized = True
    return tokenizer


_ASCII_UPPER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_UNSEEN: Any = object()
_POST_MEMO = 200_000
"""Distinct cut tokens whose outcome a Tokenizer remembers (~40 MB at most)."""


def _is_punctuation(token: str) -> bool:
    return all(unicodedata.category(ch).startswith(("P", "S")) for ch in token)


def normalise(text: str) -> str:
    """NFKC and ASCII lowercase: what the tokenizer does to text, for whole-string lookups."""
    return unicodedata.normalize("NFKC", text).translate(_ASCII_UPPER)


def query_length(text: str) -> int:
    """Characters that carry meaning: whitespace, punctuation and symbols do not count."""
    return sum(1 for ch in text if not ch.isspace() and not _is_punctuation(ch))


class Tokenizer:
    """jieba over NFKC text with the entity lexicon as user words.

    Each instance owns its own `jieba.Tokenizer`, so two datasets' lexicons never leak into
    each other through jieba's global dictionary.
    """

    def __init__(
        self,
        config: TextConfig,
        lexicon_words: Sequence[str] = (),
        canonical: Sequence[tuple[str, str]] = (),
    ) -> None:
        self.config = config
        self.lexicon_words = tuple(sorted(set(lexicon_words))) if config.use_lexicon else ()
        use_canonical = config.use_lexicon and config.canonical_entities
        self.canonical = dict(sorted(canonical)) if use_canonical else {}
        self._jieba = default_jieba()  # add_word below changes only this one's dictionary
        for word in self.lexicon_words:
            self._jieba.add_word(word)
        from retrieval_bench.text.segment.engine import FAST_NAME, REFERENCE_NAME, choose_engine

        # After the lexicon: the fast engine is a snapshot of this jieba's dictionary.
        self._fast = choose_engine(self._jieba, config.impl)
        self.impl = REFERENCE_NAME if self._fast is None else FAST_NAME
        self._post: dict[str, str | None] = {}

    @classmethod
    def for_entities(cls, config: TextConfig, entities: Iterable[Entity]) -> Tokenizer:
        words, canonical = lexicon_of(entities)
        return cls(config, words, canonical)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickles as its settings and lexicon (jieba's own tokenizer holds a lock and does
        not pickle): a worker process that unpickles it builds its own jieba with the same
        user words, so it tokenises exactly as this one does."""
        return (Tokenizer, (self.config, self.lexicon_words, tuple(self.canonical.items())))

    def identity(self) -> dict[str, object]:
        """Everything that changes the tokens: enters cache keys and the manifest."""
        lexicon = [self.lexicon_words, sorted(self.canonical.items())]
        digest = hashlib.sha256(json.dumps(lexicon, ensure_ascii=False).encode())
        return {
            "tokenizer": "jieba",
            "impl": self.impl,
            "jieba_version": getattr(_jieba(), "__version__", "unknown"),
            "use_lexicon": self.config.use_lexicon,
            "hmm": self.config.hmm,
            "drop_punctuation": self.config.drop_punctuation,
            "canonical_entities": bool(self.canonical),
            "lexicon_sha256": digest.hexdigest(),
        }

    def cut(self, normalised: str, reference: bool = False) -> list[str]:
        """jieba's segmentation of NFKC text before the settings below, by this tokenizer's
        implementation or (`reference=True`) by jieba's own Python: what segment.parity
        compares."""
        if reference or self._fast is None:
            return self._jieba.lcut(normalised, HMM=self.config.hmm)  # type: ignore[no-any-return]
        return self._fast.lcut(normalised, self.config.hmm)

    def tokenize(self, text: str, reference: bool = False) -> list[str]:
        """The indexed tokens of `text`; `reference=True`: by jieba's own Python and
        unicodedata whatever `text.impl` says (segment.parity compares the two)."""
        if self._fast is not None and not reference:
            return self._fast.tokens(text, self.config.hmm, self._post, self._finish, _POST_MEMO)
        return self.finish_all(self.cut(unicodedata.normalize("NFKC", text), reference=True))

    def finish_all(self, cut: list[str]) -> list[str]:
        """The indexed tokens of a cut: each distinct cut token's outcome is remembered (up to
        _POST_MEMO of them), as the fast engine does in C."""
        post = self._post
        tokens = []
        for token in cut:
            final = post.get(token, _UNSEEN)
            if final is _UNSEEN:
                final = self._finish(token)
                if len(post) < _POST_MEMO:
                    post[token] = final
            if final is not None:
                tokens.append(final)
        return tokens

    def _finish(self, token: str) -> str | None:
        """A cut token as indexed (lower-cased ASCII, alias to canonical name), or None for
        whitespace and (with drop_punctuation) punctuation."""
        if not token.strip():
            return None
        if self.config.drop_punctuation and _is_punctuation(token):
            return None
        token = token.translate(_ASCII_UPPER)
        return self.canonical.get(token, token)


def lexicon_of(entities: Iterable[Entity]) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """The jieba user words of a lexicon, and each lower-cased alias's canonical name."""
    words: list[str] = []
    canonical: list[tuple[str, str]] = []
    for entity in entities:
        for surface in (entity.name, *entity.aliases):
            words.append(surface)
            key = surface.translate(_ASCII_UPPER)
            canonical.append((key, entity.name.translate(_ASCII_UPPER)))
    return tuple(words), tuple(canonical)


@lru_cache(maxsize=8)
def cached_tokenizer(
    config: TextConfig,
    lexicon_words: tuple[str, ...],
    canonical: tuple[tuple[str, str], ...] = (),
) -> Tokenizer:
    """One tokenizer per process and lexicon: a multirun reuses it across jobs."""
    return Tokenizer(config, lexicon_words, canonical)


# Han ideographs (CJK Unified Ideographs, extension A, compatibility, extensions B-G).
_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
_RUNS = re.compile(rf"(?P<han>[{_HAN}]+)|(?P<word>(?:(?![{_HAN}])[^\W_])+)")


class CharBigramTokenizer:
    """Overlapping character bigrams of each run of Han characters (a one-character run is its
    own token), letters and digits kept as whole lower-cased words, everything else dropped:
    Lucene's CJKAnalyzer segmentation, the dictionary-free baseline of Chinese retrieval. No
    lexicon and no segmentation model, so an arm over it shows what jieba carries."""

    def __init__(self, config: TextConfig) -> None:
        self.config = config

    def identity(self) -> dict[str, object]:
        return {"tokenizer": "char_bigram", "version": 1}

    def tokenize(self, text: str) -> list[str]:
        normalised = unicodedata.normalize("NFKC", text).translate(_ASCII_UPPER)
        tokens: list[str] = []
        for run in _RUNS.finditer(normalised):
            han = run.group("han")
            if han is None:
                tokens.append(run.group("word"))
            elif len(han) == 1:
                tokens.append(han)
            else:
                tokens.extend(han[i : i + 2] for i in range(len(han) - 1))
        return tokens
