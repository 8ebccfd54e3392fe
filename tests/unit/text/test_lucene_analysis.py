# ruff: noqa: E501  (lines of wide CJK characters count double)
"""Lucene's English and CJK analyzers (text/lucene_analysis.py) on texts that exercise each
rule, against the token streams the real Lucene 9.9.1 produced for them (Anserini 1.7.1's
DumpAnalyzedQueries, `-language en` and `-language zh`: these expected lists are its output,
re-checked against the jar by test_lucene_analysis_parity.py, which also compares whole corpora).
"""

from __future__ import annotations

import pytest

from retrieval_bench.config.text import TextConfig
from retrieval_bench.errors import ConfigError
from retrieval_bench.text.lucene_analysis import (
    CJKBigramAnalyzer,
    EnglishAnalyzer,
    analyzer,
    standard_tokens,
    token_type,
)

# (text, Lucene's EnglishAnalyzer tokens, Lucene's CJKAnalyzer tokens)
LUCENE_STREAMS = [
    (
        "e.g. U.S.A. 3.5 1,000 IL-6 a:b don't John's JOHN’S café naïve α-helix 5′-UTR",
        [
            'e.g', 'u.s.a', '3.5', '1,000', 'il', '6', 'a:b', "don't", 'john', 'john', 'café',
            'naïv', 'α', 'helix', '5', 'utr',
        ],
        [
            'e.g', 'u.s.a', '3.5', '1,000', 'il', '6', 'a:b', "don't", "john's", 'john’s',
            'café', 'naïve', 'α', 'helix', '5', 'utr',
        ],
    ),
    (
        "The cells' responses were assessed, and the mice's weights increased by 12.5% (p<0.05).",
        [
            'cell', 'respons', 'were', 'assess', 'mice', 'weight', 'increas', '12.5', 'p',
            '0.05',
        ],
        [
            'cells', 'responses', 'were', 'assessed', "mice's", 'weights', 'increased', '12.5',
            'p', '0.05',
        ],
    ),
    (
        'ΣΊΣΥΦΟΣ İstanbul straße ﬁnance Ǆemal',
        [
            'σίσυφοσ', 'istanbul', 'straße', 'ﬁnanc', 'ǆemal',
        ],
        [
            'σίσυφοσ', 'istanbul', 'straße', 'ﬁnance', 'ǆemal',
        ],
    ),
    (
        'relational conditional generalization electricity hopeful goodness formality sensitivity',
        [
            'relat', 'condit', 'gener', 'electr', 'hope', 'good', 'formal', 'sensit',
        ],
        [
            'relational', 'conditional', 'generalization', 'electricity', 'hopeful', 'goodness',
            'formality', 'sensitivity',
        ],
    ),
    (
        '中文分词 abc 字 日本語のテキスト 한국어abc 한국어 ＡＢＣ１２３ ﾃｽﾄ ｶﾞｷﾞ ★☆ 😀👍🏽 1️⃣ 👨\u200d👩\u200d👧 🇨🇳',
        [
            '中', '文', '分', '词', 'abc', '字', '日', '本', '語', 'の', 'テキスト', '한국어abc', '한국어',
            'ａｂｃ１２３', 'ﾃｽﾄ', 'ｶﾞｷﾞ', '★', '😀', '👍🏽', '1️⃣', '👨\u200d👩\u200d👧', '🇨🇳',
        ],
        [
            '中文', '文分', '分词', 'abc', '字', '日本', '本語', '語の', 'のテ', 'テキ', 'キス', 'スト', '한국어abc',
            '한국', '국어', 'abc123', 'テス', 'スト', 'ガギ', '★', '😀', '👍🏽', '1️⃣', '👨\u200d👩\u200d👧',
            '🇨🇳',
        ],
    ),
    (
        '三亚的蜈支洲岛,门票是144元/人。It is www.example.com or foo@bar.com',
        [
            '三', '亚', '的', '蜈', '支', '洲', '岛', '门', '票', '是', '144', '元', '人', 'www.example.com',
            'foo', 'bar.com',
        ],
        [
            '三亚', '亚的', '的蜈', '蜈支', '支洲', '洲岛', '门票', '票是', '144', '元', '人', 'www.example.com',
            'foo', 'bar.com',
        ],
    ),
]


@pytest.mark.parametrize(("text", "english", "cjk"), LUCENE_STREAMS)
def test_token_streams_equal_lucenes(text: str, english: list[str], cjk: list[str]) -> None:
    assert EnglishAnalyzer().tokenize(text) == english
    assert CJKBigramAnalyzer().tokenize(text) == cjk


def test_a_token_longer_than_255_is_cut_as_lucenes_scanner_cuts_it() -> None:
    text = "a" * 600 + " " + "x" * 256
    lengths = [len(t) for t in EnglishAnalyzer().tokenize(text)]
    assert lengths == [255, 255, 90, 255, 1]  # Lucene's own output for this text


def test_token_types_follow_the_grammars_rule_order() -> None:
    tokens = standard_tokens("3.5 abc 한국어 テキスト 字 の 😀 ไทย", with_types=True)
    kinds = [kind for _, kind, _, _ in tokens]
    assert kinds == [
        "<NUM>", "<ALPHANUM>", "<HANGUL>", "<KATAKANA>", "<IDEOGRAPHIC>", "<HIRAGANA>",
        "<EMOJI>", "<SOUTHEAST_ASIAN>",
    ]  # fmt: skip
    assert token_type("Ⓜ") == "<EMOJI>"  # an emoji that is also a letter: the earlier rule
    with pytest.raises(ValueError, match="not a StandardTokenizer token"):
        token_type(" ")


def test_nltk_porter_in_martins_mode_is_lucenes_stemmer() -> None:
    """NLTK's default mode departs from Martin Porter's reference code (Lucene's
    PorterStemmer); these stems are Lucene's, where the modes differ."""
    from nltk.stem.porter import PorterStemmer

    lucene = {"aged": "ag", "additionally": "addition", "assembly": "assembl",
              "biotechnology": "biotechnolog", "bs": "bs", "analogies": "analog"}  # fmt: skip
    martin = PorterStemmer(mode=PorterStemmer.MARTIN_EXTENSIONS)
    assert {w: martin.stem(w, False) for w in lucene} == lucene
    assert [EnglishAnalyzer().tokenize(w) for w in lucene] == [[s] for s in lucene.values()]
    nltk_default = PorterStemmer()
    assert any(nltk_default.stem(w) != s for w, s in lucene.items())


def test_analyzers_pickle_for_tokenising_workers() -> None:
    import pickle

    for a in (EnglishAnalyzer(), CJKBigramAnalyzer()):
        copy = pickle.loads(pickle.dumps(a))
        assert copy.identity() == a.identity()
        assert copy.tokenize("Mice 小鼠实验") == a.tokenize("Mice 小鼠实验")


def test_an_unknown_analyzer_is_refused_with_the_list() -> None:
    with pytest.raises(ConfigError, match=r"text\.analyzer.*'lucene'.*jieba, english, cjk_bigram"):
        TextConfig(analyzer="lucene").validate()
    with pytest.raises(ValueError, match="not a Lucene analyzer"):
        analyzer("jieba")
