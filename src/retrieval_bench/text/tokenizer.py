"""Tokenisation for BM25 and the query parser: jieba with the dataset's entity lexicon."""

from __future__ import annotations

import hashlib
import json
import logging
import unicodedata
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

from retrieval_bench.config.text import TextConfig
from retrieval_bench.records import Entity


@lru_cache(maxsize=1)
def _jieba() -> Any:
    """jieba, imported on first tokenisation (not with the config schema that holds
    TextConfig), its start-up chatter silenced."""
    import jieba

    jieba.setLogLevel(logging.WARNING)
    return jieba


@lru_cache(maxsize=1)
def base_dictionary() -> tuple[dict[str, int], int]:
    """jieba's default prefix dictionary (FREQ) and total, read once per process: each
    Tokenizer starts from a copy (~20 ms) instead of jieba's own reload (~1 s)."""
    base = _jieba().Tokenizer()
    base.initialize()
    return base.FREQ, base.total


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
        self._jieba = _jieba().Tokenizer()
        freq, total = base_dictionary()
        # What jieba's initialize() sets, from the copy: add_word below changes only ours.
        self._jieba.FREQ, self._jieba.total = dict(freq), total
        self._jieba.initialized = True
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
