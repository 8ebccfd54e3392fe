"""Tokeniser variants as arms: BM25 with jieba's HMM off (`bm25_nohmm`), without the dataset's
lexicon (`bm25_nolexicon`) and over character bigrams (`bm25_bigram`), built-in nodes that run
side by side with `bm25`, each indexing what its tokenizer gives and saying which in the
manifest; a bad node is refused naming its key."""

from __future__ import annotations

import logging
from pathlib import Path

import jieba
import pytest
from conftest import compose_config, run_in_process

from retrieval_bench.config.text import TextConfig
from retrieval_bench.data.passages import load_lexicon
from retrieval_bench.errors import ConfigError
from retrieval_bench.paths import PROJECT_ROOT
from retrieval_bench.text.tokenizer import CharBigramTokenizer, Tokenizer

ARMS = ["bm25", "bm25_nohmm", "bm25_nolexicon", "bm25_bigram"]


def test_character_bigrams_as_lucene_cjk_bigrams() -> None:
    tokens = CharBigramTokenizer(TextConfig()).tokenize("GRB 090423作为，天体？Ｍ１９１１手枪 中")
    assert tokens == ["grb", "090423", "作为", "天体", "m1911", "手枪", "中"]
    assert CharBigramTokenizer(TextConfig()).tokenize("距离地球") == ["距离", "离地", "地球"]


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_hmm_off_cuts_as_jieba_without_its_hmm() -> None:
    jieba.setLogLevel(logging.WARNING)
    text = "呀诺达雨林文化旅游区的接驳车几点发车"
    entities = load_lexicon(PROJECT_ROOT / "corpus" / "travel" / "lexicon.jsonl")
    plain = jieba.Tokenizer()
    expected = [t for t in plain.lcut(text, HMM=False) if t.strip()]
    config = TextConfig(hmm=False, use_lexicon=False)
    assert Tokenizer.for_entities(config, entities).tokenize(text) == expected


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_tokeniser_arms_run_side_by_side(tmp_path: Path, shared_cache: Path) -> None:
    arms = f"retriever.arms=[{','.join(ARMS)}]"
    result, _ = run_in_process([arms, f"cache_dir={shared_cache}"], tmp_path)
    stages = result.metrics["stages"]
    assert [s for s in stages if s in ARMS] == ARMS
    tokenizers = {name: result.indexes[name]["tokenizer"] for name in ARMS}
    assert tokenizers["bm25"]["hmm"] and tokenizers["bm25"]["use_lexicon"]
    assert not tokenizers["bm25_nohmm"]["hmm"] and tokenizers["bm25_nohmm"]["use_lexicon"]
    assert not tokenizers["bm25_nolexicon"]["use_lexicon"]
    assert tokenizers["bm25_bigram"] == {"tokenizer": "char_bigram", "version": 1}
    vocabularies = {result.indexes[name]["vocabulary"] for name in ARMS}
    assert len(vocabularies) == len(ARMS), "each tokenisation indexes its own vocabulary"
    # the job-level tokenizer is the one of the job's own `text` settings
    assert result.tokenizer == tokenizers["bm25"]
    pools = {name: [r.stages[name].ids for r in result.records] for name in ARMS}
    assert pools["bm25"] != pools["bm25_bigram"] and pools["bm25"] != pools["bm25_nohmm"]


@pytest.mark.parametrize(
    ("node", "key", "message"),
    [
        ("{_target_: retrieval_bench.retrievers.bm25.BM25ArmSpec, tokens: bigrams}",
         "arms.x.tokens", "'bigrams' is not one of jieba, char_bigram"),
        ("{_target_: retrieval_bench.retrievers.bm25.BM25ArmSpec, text: {hmmm: false}}",
         "arms.x.text.hmmm", "did you mean 'hmm'"),
    ],
)  # fmt: skip
def test_a_bad_tokeniser_node_is_refused_naming_its_key(node: str, key: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as error:
        compose_config([f"+arms.x={node}", "retriever.arms=[x]"])
    assert error.value.key == key
