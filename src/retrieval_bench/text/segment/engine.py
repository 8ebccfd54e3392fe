"""The compiled copy of jieba's accurate-mode cut, and how a tokenizer picks it (`text.impl`).

Why: jieba's Python cut is most of a cold BM25 job (335 of 370 s at a million passages). The C
engine (`_dagcut.c`) runs the same algorithm on a snapshot of the same jieba.Tokenizer's data,
taken after the dataset's lexicon is added with jieba's own `add_word`: its prefix dictionary
FREQ and total, and finalseg's HMM tables and Force_Split_Words. Nothing is re-derived, so
the dictionary, the user words' suggested frequencies and the HMM are jieba's by construction;
`segment.parity` proves the cuts equal on whole corpora (`python -m run.tokens parity`).

Implementations (`text.impl`):
- `fast` (default): the engine when it is built and agrees with jieba on the job's parity
  sample; otherwise jieba, with a warning saying why.
- `fast_strict`: the engine or nothing: a missing build or a difference stops the job (exit 2).
- `jieba`: jieba's own Python, the reference.
"""

from __future__ import annotations

import logging
import math
import unicodedata
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from retrieval_bench.compiled import load
from retrieval_bench.config.text import IMPLS
from retrieval_bench.errors import ConfigError

log = logging.getLogger(__name__)

FAST_NAME = "dagcut-1"
"""The engine's name in tokenizer identities (token cache keys, manifests): bump the number
whenever the C cut changes, so no cache entry written by another version is read."""
REFERENCE_NAME = "jieba"


def _engine_type() -> tuple[Any, str | None]:
    """The extension's Engine class, or None and why it is missing (logged once)."""
    module, why = load("text.segment._dagcut")
    return (None, why) if module is None else (module.Engine, None)


@lru_cache(maxsize=1)
def nfkc_table() -> dict[int, str]:
    """Every BMP character whose NFKC form is another string, mapped to that form.

    Replacing characters by their own NFKC form leaves a text compatibility-equivalent to
    itself (equivalence holds character by character and survives concatenation), and
    equivalent texts have one NFKC form; so `NFKC(text) == NFKC(translate(text))`, and when
    `unicodedata.is_normalized("NFKC", t)` holds for t = translate(text), NFKC(text) is t. That
    check is a fast quick-check pass on CJK text, where a full normalisation of text with any
    full-width punctuation in it costs as much as the compiled cut itself.
    """
    table = {}
    for cp in range(0x10000):
        if 0xD800 <= cp < 0xE000:
            continue  # surrogates: not characters
        char = chr(cp)
        form = unicodedata.normalize("NFKC", char)
        if form != char:
            table[cp] = form
    return table


class FastCut:
    """`jieba_tokenizer.lcut(text, HMM=...)`, compiled, from the tokenizer's state now.

    `jieba_tokenizer` must have its dictionary and user words loaded; words added to it later
    are not seen (text.Tokenizer adds its lexicon before building this).
    """

    def __init__(self, jieba_tokenizer: Any) -> None:
        engine_type, why = _engine_type()
        if engine_type is None:
            raise ImportError(f"retrieval_bench.text.segment._dagcut is not built ({why})")
        from jieba import finalseg

        jieba_tokenizer.check_initialized()
        self.engine = engine_type(
            freq=jieba_tokenizer.FREQ,
            # jieba's calc takes log(self.total) in Python; the same double is passed here.
            logtotal=math.log(jieba_tokenizer.total),
            start_p=finalseg.start_P,
            trans_p=finalseg.trans_P,
            emit_p=finalseg.emit_P,
            min_float=finalseg.MIN_FLOAT,
            force_split=finalseg.Force_Split_Words,
            table=nfkc_table(),
        )

    def lcut(self, sentence: str, HMM: bool = True) -> list[str]:
        return self.engine.lcut(sentence, HMM)  # type: ignore[no-any-return]

    def normalise(self, text: str) -> str:
        """unicodedata.normalize("NFKC", text), the same string, faster (see nfkc_table)."""
        translated: str = self.engine.translate(text)
        if unicodedata.is_normalized("NFKC", translated):
            return translated
        return unicodedata.normalize("NFKC", translated)

    def tokens(
        self,
        text: str,
        hmm: bool,
        memo: dict[str, str | None],
        finish: Callable[[str], str | None],
        memo_limit: int,
    ) -> list[str]:
        """`[finish(w) for w in lcut(normalise(text), hmm)]` without the Nones, each distinct
        word's outcome looked up in `memo` (and stored there while it holds fewer than
        `memo_limit`), all in one C loop."""
        return self.engine.tokens(  # type: ignore[no-any-return]
            self.normalise(text), hmm, memo, finish, memo_limit
        )


def choose_engine(jieba_tokenizer: Any, impl: str) -> FastCut | None:
    """The compiled engine for `text.impl=impl`, or None for jieba's own cut.

    `fast` without the compiled engine logs a warning and gives None; `fast_strict` refuses
    (ConfigError naming `text.impl`).
    """
    if impl not in IMPLS:
        raise ConfigError("text.impl", f"unknown implementation {impl!r}; one of {IMPLS}")
    if impl == "jieba":
        return None
    try:
        return FastCut(jieba_tokenizer)
    except ImportError as exc:
        if impl == "fast_strict":
            raise ConfigError(
                "text.impl",
                f"fast_strict needs the compiled segmenter, which this install lacks ({exc}); "
                "reinstall with a C compiler and Python headers (pip install -e .), or set "
                "text.impl=fast (falls back to jieba) or text.impl=jieba",
            ) from None
        _note_missing(str(exc))
        return None


@lru_cache(maxsize=1)
def _note_missing(why: str) -> None:
    log.warning(
        "text.impl=fast: %s; tokenising with jieba's own Python cut (same tokens, ~15x slower)",
        why,
    )
