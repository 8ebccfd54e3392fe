"""The compiled cut (`text.impl=fast`) against jieba 0.42.1 itself: the shipped sets and
generated text in-process, the shared sets when present (slow), and what a job and the parity
command do when the two differ or the engine is missing."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from conftest import IN_CI, ROOT, shared_benchmark

from retrieval_bench.config import RunConfig
from retrieval_bench.config.text import TextConfig
from retrieval_bench.errors import EXIT_BAD_INPUT, EXIT_OK, EXIT_TOKEN_DIFFERENCE, ConfigError
from retrieval_bench.text.segment import engine
from retrieval_bench.text.segment.parity import (
    TokenParityError,
    checked_tokenizer,
    first_difference,
    sample_indices,
)
from retrieval_bench.text.segment.synthetic import synthetic_passages
from retrieval_bench.text.token_cache import token_cache_key
from retrieval_bench.text.tokenizer import Tokenizer, base_dictionary
from run import tokens as tokens_cli

SHIPPED = [
    ROOT / "corpus" / "travel",
    ROOT / "corpus" / "policy",
    ROOT / "tests" / "fixtures" / "mini" / "corpus" / "mini",
]

TRICKY = [
    "",
    "   ",
    "\r\n\r\n\n\r",
    "比分1-2失利，3.14%的人用iPhone X和Mac-Book。",
    "a.b.c 1..2 1.5.2 +#&._%- C++ C#",
    "无双系列的正统第三续作",
    "揕其胸而呼曰：“逆贼！吾",
    "乒乓球拍卖完了，结婚的和尚未结婚的",
    "他来到了网易杭研大厦",
    "\U0001f600表情😀和𠀀字",
    "e\u0301 café ＡＢＣ１２３，　全角",
    "鑫鑫鑫鑫鑫鑫鑫鑫鑫鑫鑫鑫鑫鑫鑫鑫鑫",
    "壹贰叁肆伍陆柒捌玖拾",
    "中国科学技术大学的研究生命起源",
    "ABC中文abc123中文45.6%中文",
]


def _fast(config: TextConfig | None = None, words: tuple[str, ...] = ()) -> Tokenizer:
    tokenizer = Tokenizer(config or TextConfig(), words)
    if tokenizer.impl != engine.FAST_NAME:
        if IN_CI:
            pytest.fail("the compiled segmenter is not built; CI must build it")
        pytest.skip("the compiled segmenter is not built here")
    return tokenizer


@pytest.mark.parametrize("hmm", [True, False])
def test_tricky_strings_cut_as_jieba_cuts_them(hmm: bool) -> None:
    tokenizer = _fast(TextConfig(hmm=hmm), ("蜈支洲岛", "Mac-Book", "无双系列"))
    for text in TRICKY:
        assert tokenizer.cut(text) == tokenizer.cut(text, reference=True), text
        assert tokenizer.tokenize(text) == tokenizer.tokenize(text, reference=True), text


def test_shipped_sets_identical_in_both_hmm_modes(capsys: pytest.CaptureFixture[str]) -> None:
    """What CI proves on every run: `python -m run.tokens parity` on the shipped sets."""
    _fast()
    args = [arg for folder in SHIPPED for arg in ("--corpus", str(folder))]
    assert tokens_cli.main(["parity", *args]) == EXIT_OK
    out = capsys.readouterr().out
    assert out.count("identical") == 6, out


def test_generated_text_identical_with_a_lexicon() -> None:
    words = ("蜈支洲岛", "亚龙湾", "三亚湾", "iPhone", "3.14%")
    texts = synthetic_passages(600, base_dictionary()[0], words, seed=7)
    for hmm in (True, False):
        tokenizer = _fast(TextConfig(hmm=hmm), words)
        assert first_difference(tokenizer, texts) is None


def test_engine_snapshot_holds_jieba_dictionary_and_user_words() -> None:
    tokenizer = _fast(words=("蜈支洲岛",))
    fast = tokenizer._fast
    assert fast is not None
    reference = tokenizer._jieba
    for word in ("蜈支洲岛", "蜈支洲", "中国", "的", "不在词典里的词"):
        assert fast.engine.freq(word) == reference.FREQ.get(word)
    assert fast.engine.nodes == len(reference.FREQ) + 1  # the prefixes, and the root


def test_force_split_words_are_read_at_cut_time() -> None:
    """finalseg's global Force_Split_Words (jieba's del_word adds to it) splits an HMM word
    into characters; the engine reads the same set when it cuts."""
    from jieba import finalseg

    tokenizer = _fast()
    text = "他来到了网易杭研大厦"  # 杭研: a word of the HMM, not of the dictionary
    before = tokenizer.cut(text)
    hmm_word = next(w for w in before if len(w) > 1 and tokenizer._jieba.FREQ.get(w) is None)
    finalseg.Force_Split_Words.add(hmm_word)
    try:
        assert tokenizer.cut(text) == tokenizer.cut(text, reference=True)
        assert tokenizer.cut(text) != before
    finally:
        finalseg.Force_Split_Words.discard(hmm_word)


def test_normalise_equals_unicodedata_nfkc() -> None:
    import unicodedata

    fast = _fast()._fast
    assert fast is not None
    for text in [*TRICKY, "ﬁ ㍿ ① ⅷ Å ﹏ ｶﾞ", "가나다 ᄀ\u1161", "A\u0308\u0301 \u1e9b\u0323"]:
        assert fast.normalise(text) == unicodedata.normalize("NFKC", text), text


def test_identity_names_the_implementation_in_the_cache_key() -> None:
    fast = _fast()
    reference = Tokenizer(TextConfig(impl="jieba"))
    assert fast.identity()["impl"] == engine.FAST_NAME
    assert reference.identity()["impl"] == engine.REFERENCE_NAME
    texts = ["三亚的海"]
    assert token_cache_key(fast.identity(), texts) != token_cache_key(reference.identity(), texts)


def _sabotaged(tokenizer: Tokenizer, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast cut drops the last word of any text holding 海: a stand-in for a bug."""
    fast = tokenizer._fast
    assert fast is not None
    real_lcut, real_tokens = fast.lcut, fast.tokens

    def lcut(text: str, HMM: bool = True) -> list[str]:
        words = real_lcut(text, HMM)
        return words[:-1] if "海" in text else words

    def tokens(text: str, *args: object) -> list[str]:
        words = real_tokens(text, *args)  # type: ignore[arg-type]
        return words[:-1] if "海" in text else words

    monkeypatch.setattr(fast, "lcut", lcut)
    monkeypatch.setattr(fast, "tokens", tokens)


def test_a_job_falls_back_to_jieba_or_refuses(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    texts = ["山里的风", "三亚的海很蓝", "城市的夜"]
    ids = ["p0", "p1", "p2"]
    fast = _fast(TextConfig(parity_sample=3))
    assert checked_tokenizer(fast, texts, ids) is fast
    for impl in ("fast", "fast_strict"):
        tokenizer = _fast(TextConfig(parity_sample=3, impl=impl, use_lexicon=False))
        _sabotaged(tokenizer, monkeypatch)
        if impl == "fast":
            with caplog.at_level(logging.WARNING):
                used = checked_tokenizer(tokenizer, texts, ids)
            assert used.impl == engine.REFERENCE_NAME
            assert "falling back to jieba" in caplog.text and "'p1'" in caplog.text
        else:
            with pytest.raises(TokenParityError, match=r"(?s)text\.impl.*'p1'.*jieba:"):
                checked_tokenizer(tokenizer, texts, ids)


def test_parity_command_reports_the_first_difference(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _fast()
    real_init = engine.FastCut.__init__

    def init(self: engine.FastCut, jieba_tokenizer: object) -> None:
        """A fast cut that loses every text's last word."""
        real_init(self, jieba_tokenizer)
        real = self.engine.lcut
        monkeypatch.setattr(self, "lcut", lambda t, HMM=True: real(t, HMM)[:-1])

    monkeypatch.setattr(engine.FastCut, "__init__", init)
    code = tokens_cli.main(["parity", "--corpus", str(SHIPPED[2]), "--hmm", "on"])
    out = capsys.readouterr().out
    assert code == EXIT_TOKEN_DIFFERENCE
    assert "DIFFERENT" in out and "jieba: [" in out and "fast:  [" in out and "text: " in out


def test_parity_compares_the_indexed_tokens_not_only_the_cut(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A fast path whose cut is jieba's but whose finishing (normalise, drop, rewrite: in C)
    loses each text's last token: the cuts agree, so only a comparison of the final tokens,
    what the index holds, finds it."""
    tokenizer = _fast()
    fast = tokenizer._fast
    assert fast is not None
    real = fast.tokens
    monkeypatch.setattr(fast, "tokens", lambda *args: real(*args)[:-1])
    texts = ["三亚的蜈支洲岛门票多少钱", "海口骑楼老街"]
    found = first_difference(tokenizer, texts, ["p1", "p2"])
    assert found is not None
    assert (found.passage_id, found.stage) == ("p1", "tokens")
    assert found.reference == tokenizer.finish_all(tokenizer.cut(found.text, reference=True))
    assert found.fast == found.reference[:-1]


def test_parity_command_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert tokens_cli.main(["parity", "--corpus", str(tmp_path / "absent")]) == EXIT_BAD_INPUT
    assert "no passages.jsonl" in capsys.readouterr().err


def test_missing_engine_falls_back_or_refuses(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(engine, "_engine_type", lambda: (None, "ImportError: not built"))
    engine._note_missing.cache_clear()
    with caplog.at_level(logging.WARNING):
        assert Tokenizer(TextConfig(impl="fast")).impl == engine.REFERENCE_NAME
    assert "not built" in caplog.text
    with pytest.raises(ConfigError, match=r"text\.impl.*fast_strict"):
        Tokenizer(TextConfig(impl="fast_strict"))


def test_config_keys_are_checked() -> None:
    with pytest.raises(ConfigError, match=r"text\.impl.*'quick'"):
        TextConfig(impl="quick").validate()
    with pytest.raises(ConfigError, match=r"text\.parity_sample"):
        TextConfig(parity_sample=-1).validate()
    RunConfig().text.validate()


def test_sample_spreads_over_the_corpus() -> None:
    assert sample_indices(5, 10) == [0, 1, 2, 3, 4]
    picked = sample_indices(1000, 4)
    assert picked == [0, 250, 500, 750]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["cmrc2018", "scifact"])
def test_shared_sets_identical(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    folder = shared_benchmark(name)
    _fast()
    assert tokens_cli.main(["parity", "--beir", str(folder), "--workers", "2"]) == EXIT_OK
    assert capsys.readouterr().out.count("identical") == 2
