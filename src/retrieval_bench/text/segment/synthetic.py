"""Synthetic passages that exercise every path of jieba's cut, for the parity check at scale.

Why not random characters: most of jieba's cut only runs on text made of its own words (long
DAG routes, ties between routes, words that are prefixes of others) and on the runs between
them (single characters that go to the HMM, Latin and digits that finalseg's regex splits,
`1-2`, `3.14%`, `\\r\\n`). Each passage mixes, by chance from a fixed seed: dictionary words drawn
by jieba's own frequencies, the lexicon's words, runs of random CJK characters (HMM),
numbers with decimals and percent signs, Latin words in both cases, the punctuation
characters of re_han_default (`+#&._%-`), full-width punctuation and spaces (which NFKC
rewrites), whitespace including `\\r\\n`, and a few characters beyond the BMP and combining
marks. Deterministic for a (count, seed, words) triple.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

_PUNCT = list("，。、；：？！“”‘’（）《》【】—…·")
_HALF = list("+#&._%-,;:!?()[]/\\'\"@$*=<>~^|`")
_SPACE = [" ", "  ", "\t", "\n", "\r\n", "\u3000", "\u00a0"]
_RARE = ["\U0001f600", "\U00020000", "e\u0301", "\u00e9", "\uff21\uff22", "\u2460", "\ufb01"]


def _pieces(
    rng: np.random.Generator, words: Sequence[str], weights: np.ndarray, lexicon: Sequence[str]
) -> Iterator[str]:
    """Pieces of text, drawn 8,192 at a time (numpy per batch, plain lists per piece)."""
    batch = 8192
    while True:
        kinds = rng.random(batch).tolist()
        picked = np.searchsorted(weights, rng.random(batch)).tolist()
        lex = rng.integers(max(len(lexicon), 1), size=batch).tolist()
        runs = rng.integers(0x4E00, 0x9FD6, size=(batch, 4)).tolist()
        run_lengths = rng.integers(1, 5, size=batch).tolist()
        numbers = rng.integers(0, 100_000, size=batch).tolist()
        digits = rng.integers(1, 6, size=batch).tolist()
        decimals = rng.integers(0, 100, size=batch).tolist()
        coins = rng.random((batch, 3)).tolist()
        letters = rng.integers(0, 26, size=(batch, 7)).tolist()
        choice = rng.integers(0, 1 << 30, size=batch).tolist()
        for i, kind in enumerate(kinds):
            if kind < 0.62:
                yield words[picked[i]]
            elif kind < 0.66 and lexicon:
                yield lexicon[lex[i]]
            elif kind < 0.76:
                yield "".join(map(chr, runs[i][: run_lengths[i]]))
            elif kind < 0.81:
                number = str(numbers[i] % 10 ** digits[i])
                if coins[i][0] < 0.3:
                    number += f".{decimals[i]}"
                if coins[i][1] < 0.2:
                    number += "%"
                yield number
            elif kind < 0.85:
                base = ord("A") if coins[i][2] < 0.3 else ord("a")
                yield "".join(chr(base + c) for c in letters[i][: 1 + choice[i] % 7])
            elif kind < 0.88:
                yield _HALF[choice[i] % len(_HALF)]
            elif kind < 0.96:
                yield _PUNCT[choice[i] % len(_PUNCT)]
            elif kind < 0.99:
                yield _SPACE[choice[i] % len(_SPACE)]
            else:
                yield _RARE[choice[i] % len(_RARE)]


def synthetic_passages(
    count: int, dictionary: dict[str, int], lexicon: Sequence[str] = (), seed: int = 0
) -> list[str]:
    """`count` passages of 20-250 characters from jieba's dictionary (`FREQ`: word -> count;
    zero-count prefixes are skipped) and the lexicon's words."""
    rng = np.random.default_rng(seed)
    words = sorted(w for w, f in dictionary.items() if f > 0)
    counts = np.asarray([dictionary[w] for w in words], dtype=np.float64)
    weights = np.cumsum(counts) / counts.sum()
    pieces = _pieces(rng, words, weights, list(lexicon))
    passages = []
    for target in rng.integers(20, 251, size=count).tolist():
        parts: list[str] = []
        length = 0
        while length < target:
            piece = next(pieces)
            parts.append(piece)
            length += len(piece)
        passages.append("".join(parts))
    return passages
