"""The corpus is numbered as the tokenizer produces it: at most one chunk of passages' token
lists is alive at once (a million passages' lists would take ~5 GB), with the same term ids as
numbering the whole list in one pass."""

from __future__ import annotations

import random
import weakref
from pathlib import Path

import numpy as np

from retrieval_bench.text import token_cache
from retrieval_bench.text.token_cache import FROM_TOKENS_CHUNK, TokenizedCorpus, tokenize_corpus


class Tokens(list):  # type: ignore[type-arg]
    """A token list that can be weakly referenced (to count the ones alive)."""


def corpus(n: int) -> list[list[str]]:
    rng = random.Random(3)
    words = [f"w{i}" for i in range(500)]
    return [[rng.choice(words) for _ in range(rng.randrange(0, 6))] for _ in range(n)]


def one_pass_numbering(token_lists: list[list[str]]) -> tuple[list[str], list[int], list[int]]:
    """First-occurrence numbering written out plainly, as the reference."""
    vocab: dict[str, int] = {}
    ids = [vocab.setdefault(t, len(vocab)) for toks in token_lists for t in toks]
    return list(vocab), ids, [len(toks) for toks in token_lists]


def test_numbering_from_an_iterator_equals_one_pass_over_the_list() -> None:
    lists = corpus(2 * FROM_TOKENS_CHUNK + 7)  # three chunks, empty passages among them
    vocab, ids, lengths = one_pass_numbering(lists)
    for source in (lists, iter(lists), (toks for toks in lists)):
        tokenized = TokenizedCorpus.from_tokens(source)
        assert tokenized.vocab == vocab
        assert tokenized.ids.dtype == np.int32 and tokenized.ids.tolist() == ids
        assert tokenized.lengths.dtype == np.int64 and tokenized.lengths.tolist() == lengths
        assert tokenized.token_lists() == lists


def test_empty_corpus() -> None:
    tokenized = TokenizedCorpus.from_tokens(iter([]))
    assert tokenized.vocab == [] and len(tokenized) == 0
    assert tokenized.ids.dtype == np.int32 and tokenized.ids.size == 0
    assert tokenized.lengths.dtype == np.int64


def test_tokenising_keeps_one_chunk_of_token_lists_alive(tmp_path: Path) -> None:
    lists = corpus(3 * FROM_TOKENS_CHUNK + 1)
    texts = [" ".join(toks) + f"#{i}" for i, toks in enumerate(lists)]
    alive = [0]
    most = [0]

    def dropped() -> None:
        alive[0] -= 1

    def tokenize(text: str) -> list[str]:
        tokens = Tokens(text.split("#")[0].split())
        alive[0] += 1
        weakref.finalize(tokens, dropped)
        most[0] = max(most[0], alive[0])
        return tokens

    for root in (None, tmp_path):  # without and with the token cache
        most[0] = 0
        tokenized = tokenize_corpus(texts, tokenize, {"t": 1}, root)
        assert tokenized.token_lists() == lists
        assert most[0] <= FROM_TOKENS_CHUNK + 1, f"{most[0]} token lists alive at once"
    assert len(texts) > token_cache.FROM_TOKENS_CHUNK
