"""The tokenised-corpus cache: a hit returns exactly what tokenising would, never stale data."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from retrieval_bench.retrievers.bm25 import BM25Config, BM25Retriever, SparseBM25
from retrieval_bench.text.token_cache import TokenizedCorpus, token_cache_key, tokenize_corpus

TEXTS = ["海口 骑楼 老街", "三亚 海棠湾 海口", "", "emoji 😀 and é café", "海口 海口 a\u00a0b"]
IDENTITY = {"tokenizer": "split", "version": 1}


class CountingSplit:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, text: str) -> list[str]:
        self.calls += 1
        return text.split()


def test_miss_then_hit_returns_the_same_tokens(tmp_path: Path) -> None:
    split = CountingSplit()
    first = tokenize_corpus(TEXTS, split, IDENTITY, tmp_path)
    assert not first.cached and split.calls == len(TEXTS)
    again = tokenize_corpus(TEXTS, split, IDENTITY, tmp_path)
    assert again.cached and split.calls == len(TEXTS), "a hit runs no tokenizer"
    assert again.token_lists() == [t.split() for t in TEXTS] == first.token_lists()
    assert again.vocab == first.vocab
    np.testing.assert_array_equal(again.ids, first.ids)
    np.testing.assert_array_equal(again.lengths, first.lengths)


def test_key_follows_tokenizer_identity_and_texts() -> None:
    base = token_cache_key(IDENTITY, TEXTS)
    assert token_cache_key({**IDENTITY, "version": 2}, TEXTS) != base
    assert token_cache_key(IDENTITY, [*TEXTS[:-1], TEXTS[-1] + " "]) != base
    assert token_cache_key(IDENTITY, ["ab", "c"]) != token_cache_key(IDENTITY, ["a", "bc"])


def test_corrupt_entry_is_rebuilt(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    tokenize_corpus(TEXTS, str.split, IDENTITY, tmp_path)
    (entry,) = tmp_path.rglob("*.npz")
    entry.write_bytes(entry.read_bytes()[:100])
    with caplog.at_level(logging.WARNING):
        rebuilt = tokenize_corpus(TEXTS, str.split, IDENTITY, tmp_path)
    assert not rebuilt.cached and "rebuilding" in caplog.text
    assert rebuilt.token_lists() == [t.split() for t in TEXTS]
    assert tokenize_corpus(TEXTS, str.split, IDENTITY, tmp_path).cached


def test_bm25_from_cached_ids_equals_bm25_from_tokens(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(50)]
    texts = [" ".join(rng.choice(words, rng.integers(1, 30))) for _ in range(200)]
    tokenize_corpus(texts, str.split, IDENTITY, tmp_path)
    cached = tokenize_corpus(texts, str.split, IDENTITY, tmp_path)
    assert cached.cached
    ids = [f"p{i}" for i in range(len(texts))]
    direct = SparseBM25([t.split() for t in texts], BM25Config())
    for impl in ("sparse", "rank_bm25"):
        retriever = BM25Retriever(ids, cached, str.split, BM25Config(impl=impl))
        for query in (["w1", "w2"], ["w3", "w3", "w49"], ["nope"]):
            np.testing.assert_array_equal(
                retriever.scorer.scores(query)[0], direct.scores(query)[0]
            )
        assert retriever.index_info()["tokens_from_cache"] is True


def test_no_root_means_no_cache() -> None:
    corpus = tokenize_corpus(TEXTS, str.split, IDENTITY, None)
    assert isinstance(corpus, TokenizedCorpus) and not corpus.cached and len(corpus) == len(TEXTS)
