"""Parallel tokenisation (text.workers): worker processes give exactly the token ids of one."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from retrieval_bench.config.text import TextConfig
from retrieval_bench.errors import ConfigError
from retrieval_bench.text import token_cache
from retrieval_bench.text.token_cache import tokenize_corpus
from retrieval_bench.text.tokenizer import Tokenizer

LEXICON = ("蜈支洲岛", "骑楼老街", "海棠湾免税城")
CANONICAL = (("蜈支洲", "蜈支洲岛"),)
PHRASES = [
    "海口骑楼老街有很多百年老建筑，",
    "三亚海棠湾免税城周末人很多。",
    "蜈支洲岛适合潜水，船票要提前买；",
    "去蜈支洲的船几点开？",
    "Hainan 的 CAFÉ 咖啡很好喝！",
    "文昌的卫星发射中心可以参观",
]


def _corpus(n: int) -> list[str]:
    rng = np.random.default_rng(7)
    return ["".join(rng.choice(PHRASES, int(rng.integers(1, 5)))) + f"第{i}段" for i in range(n)]


@pytest.fixture
def tokenizer() -> Tokenizer:
    return Tokenizer(TextConfig(), LEXICON, CANONICAL)


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Go parallel on a small corpus, in many chunks, so the chunk merge is exercised."""
    monkeypatch.setattr(token_cache, "PARALLEL_MIN_PASSAGES", 10)
    monkeypatch.setattr(token_cache, "_CHUNK_PASSAGES", 37)


def test_two_workers_give_the_same_token_ids_as_one(
    tokenizer: Tokenizer, small_chunks: None, tmp_path: Path
) -> None:
    texts = _corpus(400)
    one = tokenize_corpus(texts, tokenizer.tokenize, tokenizer.identity(), None, workers=1)
    two = tokenize_corpus(texts, tokenizer.tokenize, tokenizer.identity(), None, workers=2)
    assert two.vocab == one.vocab
    np.testing.assert_array_equal(two.ids, one.ids)
    np.testing.assert_array_equal(two.lengths, one.lengths)
    assert two.ids.dtype == np.int32 and two.lengths.dtype == np.int64
    # the lexicon reached the workers: its words are whole tokens, aliases made canonical
    assert {"蜈支洲岛", "骑楼老街", "海棠湾免税城"} <= set(two.vocab)
    assert "蜈支洲" not in two.vocab
    # and through the cache: a parallel miss writes what a one-process hit reads back
    stored = tokenize_corpus(texts, tokenizer.tokenize, tokenizer.identity(), tmp_path, 2)
    hit = tokenize_corpus(texts, tokenizer.tokenize, tokenizer.identity(), tmp_path, 1)
    assert hit.cached and not stored.cached
    assert hit.vocab == one.vocab
    np.testing.assert_array_equal(hit.ids, one.ids)


def test_more_workers_than_chunks_and_empty_passages(
    tokenizer: Tokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(token_cache, "PARALLEL_MIN_PASSAGES", 1)
    texts = ["", "海口骑楼老街", "！！", "蜈支洲"]
    one = tokenize_corpus(texts, tokenizer.tokenize, {}, None, workers=1)
    many = tokenize_corpus(texts, tokenizer.tokenize, {}, None, workers=3)
    assert many.token_lists() == one.token_lists() == [[], ["海口", "骑楼老街"], [], ["蜈支洲岛"]]


def test_tokenizer_pickles_as_its_settings_and_lexicon(tokenizer: Tokenizer) -> None:
    copy = pickle.loads(pickle.dumps(tokenizer))
    assert copy.identity() == tokenizer.identity()
    for text in PHRASES:
        assert copy.tokenize(text) == tokenizer.tokenize(text)


def test_workers_setting() -> None:
    assert TextConfig(workers=3).resolved_workers() == 3
    assert TextConfig(workers=0).resolved_workers() >= 1
    with pytest.raises(ConfigError) as err:
        TextConfig(workers=-1).resolved_workers()
    assert err.value.key == "text.workers"
    # workers never changes the tokens, so never the cache key
    assert (
        Tokenizer(TextConfig(workers=4), LEXICON).identity()
        == Tokenizer(TextConfig(), LEXICON).identity()
    )


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_spawned_workers_rebuild_the_tokenizer_and_lexicon(
    tokenizer: Tokenizer, small_chunks: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where fork is unavailable (macOS, Windows) workers are spawned: the tokenizer reaches
    them pickled, as its settings and lexicon, and gives the same ids."""
    monkeypatch.setattr(token_cache.multiprocessing, "get_all_start_methods", lambda: ["spawn"])
    texts = _corpus(60)
    one = tokenize_corpus(texts, tokenizer.tokenize, {}, None, workers=1)
    spawned = tokenize_corpus(texts, tokenizer.tokenize, {}, None, workers=2)
    assert spawned.vocab == one.vocab and "蜈支洲岛" in spawned.vocab
    np.testing.assert_array_equal(spawned.ids, one.ids)
