"""The tokeniser's typed settings (`text.*`); the tokeniser itself is `text.tokenizer`."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from retrieval_bench.errors import ConfigError

# Who cuts the text into tokens (`text.impl`): the compiled copy of jieba's cut (text/segment/),
# falling back to jieba where it is not built or differs on the parity sample ("fast"), or
# refusing then ("fast_strict"); or jieba's own Python, the reference ("jieba").
IMPLS = ("fast", "fast_strict", "jieba")
# What cuts a BM25 arm's text into terms (`text.analyzer`): jieba (the project's tokenizer, the
# settings above), or one of Lucene's analyzers, as Elasticsearch and Anserini index text
# (text/lucene_analysis.py): `english` (EnglishAnalyzer: stopwords, Porter stems) or
# `cjk_bigram` (CJKAnalyzer: overlapping bigrams of CJK characters).
ANALYZERS = ("jieba", "english", "cjk_bigram")


@dataclass(unsafe_hash=True)  # mutable for Hydra overrides, hashable for the tokenizer memo
class TextConfig:
    """Tokeniser settings; each one but `workers` and `parity_sample` changes the BM25 index,
    so the others enter its cache key (Tokenizer.identity; `impl` as the name of what cuts)."""

    use_lexicon: bool = True
    """Load the dataset's lexicon (`lexicon.jsonl`) into jieba as a user dictionary, so its
    entities are cut as one word."""
    hmm: bool = True
    """jieba's HMM for words not in its dictionary (false: such words stay single characters)."""
    drop_punctuation: bool = True
    """Drop punctuation and whitespace tokens before indexing and searching."""
    canonical_entities: bool = True
    """Rewrite an alias token to its entity's canonical name, so "蜈支洲" in a query matches
    "蜈支洲岛" in a passage; the lexicon's own words are the only ones rewritten."""
    workers: int = 1
    """Processes that tokenise the corpus on a token-cache miss (0: one per CPU core). Any count
    gives the same token ids; corpora under 2,000 passages are tokenised in-process."""
    impl: str = field(default="fast", metadata={"choices": IMPLS})
    """Who cuts: "fast" (jieba's cut compiled, text/segment/; jieba when not built or when it
    differs on the parity sample, with a warning), "fast_strict" (refuse instead of falling
    back), "jieba" (jieba's own Python, the reference). Enters the cache key by the name of what
    cuts."""
    parity_sample: int = 256
    """Passages of each corpus cut by both jieba and the fast engine and compared before the fast
    one is used (0: no check). Not in the cache key: it changes no token."""
    analyzer: str = field(default="jieba", metadata={"choices": ANALYZERS})
    """jieba, or a Lucene analyzer (ANALYZERS); the jieba settings above apply to jieba only."""

    def validate(self) -> None:
        """The keys Hydra's types cannot check; ConfigError names the first bad one."""
        if self.analyzer not in ANALYZERS:
            known = ", ".join(ANALYZERS)
            message = f"unknown analyzer {self.analyzer!r}; one of {known}"
            raise ConfigError("text.analyzer", message)
        if self.impl not in IMPLS:
            raise ConfigError("text.impl", f"unknown implementation {self.impl!r}; one of {IMPLS}")
        if self.parity_sample < 0:
            raise ConfigError("text.parity_sample", f"must be >= 0, got {self.parity_sample}")
        self.resolved_workers()

    def resolved_workers(self) -> int:
        """`workers`, with 0 read as the CPU cores this process may use."""
        if self.workers < 0:
            raise ConfigError(
                "text.workers", f"must be >= 0 (0: one per CPU core), got {self.workers}"
            )
        if self.workers == 0:
            return (
                len(os.sched_getaffinity(0))
                if hasattr(os, "sched_getaffinity")
                else (os.cpu_count() or 1)
            )
        return self.workers
