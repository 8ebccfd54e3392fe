"""BM25 with rank_bm25's BM25Okapi semantics (or Lucene's BM25Similarity,
`arms.<name>.variant=lucene`), scored as a sparse matrix product.

rank_bm25 walks every document in Python for every query term; here the per-(term, passage)
weights are precomputed once (each as a code into a table of saturated tfs, times the term's
IDF when read: bm25_build), so a query costs one sparse row gather. Scores equal
rank_bm25's (tests compare them to 1e-9), including the epsilon floor: a term whose IDF is
negative gets `epsilon * mean(IDF over the vocabulary)`. `impl="rank_bm25"` runs the reference
itself.

`arms.bm25.variant=lucene` scores as Lucene 9's BM25Similarity does (what Elasticsearch and
OpenSearch run; bm25_build's module docstring): Lucene's idf, the one-byte length norm, float32
arithmetic, and a term repeated in the query counted as Lucene's query builders count it (Anserini's
bag of words: one clause per distinct term, boosted by its count), so its float32 scores are
Lucene's own (tests compare them with the real Lucene's, retrievers/lucene.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from retrieval_bench.config.bm25 import BM25ArmConfig, BM25Config
from retrieval_bench.config.text import TextConfig
from retrieval_bench.errors import ConfigError
from retrieval_bench.plugins import with_overrides
from retrieval_bench.progress import progress
from retrieval_bench.protocols import Arm, BuildContext
from retrieval_bench.records import FILTERED_OUT, NO_MATCHING_TERMS, NO_QUERY_TERMS, Ranked
from retrieval_bench.retrievers.base import TextArm
from retrieval_bench.retrievers.bm25_build import build_index
from retrieval_bench.retrievers.bm25_kernel import score_rows, top_rows
from retrieval_bench.text.token_cache import TokenizedCorpus

if TYPE_CHECKING:
    from retrieval_bench.text.lucene_analysis import CJKBigramAnalyzer, EnglishAnalyzer
    from retrieval_bench.text.tokenizer import CharBigramTokenizer, Tokenizer
from retrieval_bench.tiebreak import shared_tie_break


class SparseBM25:
    """Exact BM25Okapi over a term x passage CSR matrix of idf x saturated, normalised tf (each
    posting a code into `table`, its weight idf x table[code]; bm25_build).

    Bit-for-bit rank_bm25: each weight is computed with rank_bm25's expression and
    operation order, IDFs with `math.log` in rank_bm25's vocabulary order (the epsilon floor
    uses the same sequential mean), and a query's per-term contributions are added per passage
    in query-token order starting from 0.0, as `get_scores` adds them.
    """

    def __init__(self, corpus_tokens: Sequence[Sequence[str]], config: BM25Config) -> None:
        # One C-level pass numbers the terms by first occurrence: rank_bm25's vocabulary order,
        # which fixes the order it sums IDFs in for the epsilon floor.
        corpus = TokenizedCorpus.from_tokens(corpus_tokens)
        self._build(corpus.vocab, corpus.ids, corpus.lengths, config)

    @classmethod
    def from_term_ids(
        cls,
        vocab: Sequence[str],
        term_ids: np.ndarray,
        lengths: np.ndarray,
        config: BM25Config,
        chunk_passages: int | None = None,
    ) -> SparseBM25:
        """Index a corpus already mapped to term ids (`vocab[i]` in first-occurrence order,
        passage j's ids are the next `lengths[j]` of `term_ids`), e.g. from a token cache,
        `chunk_passages` passages at a time (None: bm25_build.CHUNK_PASSAGES)."""
        self = cls.__new__(cls)
        self._build(vocab, term_ids, lengths, config, chunk_passages)
        return self

    def _build(
        self,
        vocab: Sequence[str],
        term_ids: np.ndarray,
        lengths: np.ndarray,
        config: BM25Config,
        chunk_passages: int | None = None,
    ) -> None:
        self.vocab = dict(zip(vocab, range(len(vocab)), strict=True))
        n_docs = len(lengths)
        # Chunk by chunk (bm25_build): the peak is the index plus one chunk, not every token's
        # COO triple, so a corpus of 10M passages indexes on a 24 GB machine.
        index = build_index(term_ids, lengths, len(vocab), config, chunk_passages)
        self.idf = index.idf
        self.average_idf = index.average_idf  # rank_bm25's attribute, for parity checks
        # Codes into `table` per posting (None: the weights themselves): 6 bytes a posting
        # instead of 12, which a query at 1M passages streams (bm25_build).
        self.matrix = index.matrix
        self.table = index.table
        self.n_docs = n_docs
        self._indptr64 = self.matrix.indptr.astype(np.int64)  # the compiled kernel's layout
        self.variant = config.variant
        # Lucene's term score w - w / d is > 0 for every w > 0 when each denominator d is far
        # enough above 1 (k1 > 0 of any practical size): matched passages are then read off
        # the scores; otherwise they are marked.
        self.sure_positive = True
        if self.variant == "lucene" and self.matrix.nnz:
            values = self.matrix.data if self.table is None else self.table[self.matrix.data]
            self.sure_positive = bool(values.min() > 1 + 2.0**-20)
        # Codes in use in the table (the rest is NaN): the kernel's per-query tables for
        # Lucene's formula span them.
        self.n_codes = 0 if self.table is None else int(np.count_nonzero(~np.isnan(self.table)))
        self.compiled = True  # False: the numpy path (tests compare both with rank_bm25)
        self._scratch = np.zeros(n_docs)
        self._scratch_lock = threading.Lock()

    def query_rows(self, query_tokens: Sequence[str]) -> list[int]:
        """The query's term rows in query order, a repeated token repeated: rank_bm25 iterates
        the query list; Lucene's formula makes a repeated term one clause boosted by its count,
        which the scorer does (bm25_kernel.lucene_clauses)."""
        return [row for row in map(self.vocab.get, query_tokens) if row is not None]

    def scores(self, query_tokens: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(scores over all passages, indices of passages sharing at least one query term)."""
        rows = self.query_rows(query_tokens)
        if not rows:
            return np.zeros(self.n_docs), np.empty(0, dtype=np.int64)
        return score_rows(
            self.matrix,
            self.table,
            self._indptr64,
            self.idf,
            rows,
            self.compiled,
            self.variant == "lucene",
            self.sure_positive,
            self.n_codes,
        )

    def top(
        self,
        query_tokens: Sequence[str],
        k: int,
        id_order: np.ndarray,
        allowed: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray, bool, bool] | None:
        """What `scores` + `TieBreak.top` give for the matched passages `allowed` lets through
        (indices, scores, best first), with whether any passage matched and whether any of
        those is allowed; None where the compiled kernel is not built (or `compiled` is off):
        then use those two."""
        if not self.compiled:
            return None
        rows = self.query_rows(query_tokens)
        if not rows:
            empty = np.empty(0, dtype=np.int64)
            return empty, np.empty(0), False, False
        # One zeroed scratch vector per index, left zeroed by the kernel; a second caller at
        # the same moment (threads) gets its own.
        held = self._scratch_lock.acquire(blocking=False)
        try:
            return top_rows(
                self.matrix,
                self.table,
                self._indptr64,
                self.idf,
                rows,
                id_order,
                k,
                allowed,
                self._scratch if held else np.zeros(self.n_docs),
                self.variant == "lucene",
                self.sure_positive,
                self.n_codes,
            )
        finally:
            if held:
                self._scratch_lock.release()


class ReferenceBM25:
    """rank_bm25.BM25Okapi itself, for checking and for users who want the original."""

    def __init__(self, corpus_tokens: Sequence[Sequence[str]], config: BM25Config) -> None:
        from rank_bm25 import BM25Okapi

        self.model = BM25Okapi(
            [list(t) for t in corpus_tokens], k1=config.k1, b=config.b, epsilon=config.epsilon
        )
        self.vocab = self.model.idf

    def scores(self, query_tokens: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        scores = np.asarray(self.model.get_scores(list(query_tokens)), dtype=np.float64)
        terms = {t for t in query_tokens if t in self.vocab}
        matched = [i for i, freqs in enumerate(self.model.doc_freqs) if terms & freqs.keys()]
        return scores, np.asarray(matched, dtype=np.int64)


class BM25Retriever:
    """The BM25 arm: passages that share no term with the query are not candidates, so a query
    of only punctuation, or of terms the corpus lacks, gets an empty pool that says why."""

    name = "bm25"

    def __init__(
        self,
        passage_ids: Sequence[str],
        corpus_tokens: Sequence[Sequence[str]] | TokenizedCorpus,
        tokenize: Callable[[str], list[str]],
        config: BM25Config,
    ) -> None:
        if config.variant == "lucene" and config.impl != "sparse":
            raise ConfigError(
                "impl",
                "variant=lucene is computed by impl=sparse only (rank_bm25 has no Lucene formula)",
            )
        start = time.perf_counter()
        self.tokens_cached: bool | None = None
        # What cost() reports of the tokenised corpus (where it came from, what it cost), not
        # the tokens: their term ids (4 bytes a token, 2.3 GB at 10M passages) are not needed
        # once the index is built, and holding them would add to every later phase's peak.
        self.tokens: TokenizedCorpus | None = None
        # Seconds the job spent getting the tokens (tokenising, or reading the token cache);
        # set by the spec that fetched them.
        self.tokens_s: float | None = None
        if isinstance(corpus_tokens, TokenizedCorpus):
            self.tokens_cached = corpus_tokens.cached
            self.tokens = corpus_tokens.without_tokens()
            if config.impl == "sparse":
                self.scorer: SparseBM25 | ReferenceBM25 = SparseBM25.from_term_ids(
                    corpus_tokens.vocab, corpus_tokens.ids, corpus_tokens.lengths, config
                )
            else:
                self.scorer = ReferenceBM25(corpus_tokens.token_lists(), config)
        else:
            impl = SparseBM25 if config.impl == "sparse" else ReferenceBM25
            self.scorer = impl(corpus_tokens, config)
        self.build_s = time.perf_counter() - start
        self.config = config
        self.tokenize = tokenize
        self.tie_break = shared_tie_break(passage_ids)
        # The identity of what tokenised the corpus and the queries (for the manifest).
        self.tokenizer: dict[str, object] | None = None

    def index_info(self) -> dict[str, Any]:
        """For the manifest: which implementation, how big, how long it took to build."""
        info: dict[str, Any] = {
            "impl": self.config.impl,
            "variant": self.config.variant,
            "passages": len(self.tie_break.id_order),
            "vocabulary": len(self.scorer.vocab),
            "build_s": round(self.build_s, 4),
            "tokens_from_cache": self.tokens_cached,
        }
        if self.tokenizer is not None:
            info["tokenizer"] = self.tokenizer
        if isinstance(self.scorer, SparseBM25):
            info["postings"] = int(self.scorer.matrix.nnz)
            info["bytes"] = self.index_bytes()
        info["cost"] = self.cost()
        return info

    def cost(self) -> dict[str, Any]:
        """What the index cost to build and holds (job.cost's per-arm record): tokenising
        the corpus is BM25's "prepare" step (cold: when it was tokenised), the matrix its
        index (the reference implementation's size is not measured)."""
        tokens = self.tokens
        return {
            "prepare": "tokenise passages",
            "prepare_s": None if self.tokens_s is None else round(self.tokens_s, 4),
            "prepare_source": None if tokens is None else "cache" if tokens.cached else "computed",
            "prepare_cold_s": None
            if tokens is None or tokens.cold_seconds is None
            else round(tokens.cold_seconds, 4),
            "passages": len(self.tie_break.id_order),
            "index_s": round(self.build_s, 4),
            "index_reused": False,
            "index_bytes": self.index_bytes(),
            "disk_bytes": None if tokens is None else tokens.disk_bytes,
        }

    def index_bytes(self) -> int | None:
        """The sparse index's arrays in memory (None for the reference implementation)."""
        if not isinstance(self.scorer, SparseBM25):
            return None
        matrix = self.scorer.matrix
        parts = (matrix.data, matrix.indices, matrix.indptr, self.scorer.idf, self.scorer.table)
        return int(sum(part.nbytes for part in parts if part is not None))

    def search(
        self, queries: Sequence[str], k: int, allowed: Sequence[np.ndarray | None]
    ) -> list[Ranked]:
        pairs = zip(queries, allowed, strict=True)
        return [
            self._rank(self.tokenize(query), k, mask)
            for query, mask in progress("ranking queries (bm25)", len(queries), "query", pairs)
        ]

    def time_query(self, query: str, k: int, mask: np.ndarray | None) -> dict[str, float]:
        """One query timed as it is served: tokenising (`encode_ms`), then scoring and the
        top k (`search_ms`)."""
        start = time.perf_counter()
        tokens = self.tokenize(query)
        tokenised = time.perf_counter()
        self._rank(tokens, k, mask)
        done = time.perf_counter()
        return {"encode_ms": 1000 * (tokenised - start), "search_ms": 1000 * (done - tokenised)}

    def _rank(self, tokens: list[str], k: int, mask: np.ndarray | None) -> Ranked:
        fused = None
        if isinstance(self.scorer, SparseBM25):  # the compiled kernel, where built
            fused = self.scorer.top(tokens, k, self.tie_break.id_order, mask)
        if fused is not None:
            indices, top, any_matched, any_allowed = fused
        else:
            scores, matched = self.scorer.scores(tokens)
            any_matched = len(matched) > 0
            if mask is not None:
                matched = matched[mask[matched]]
            any_allowed = len(matched) > 0
            indices, top = self.tie_break.top(matched, scores[matched], k)
        reason = None if any_matched else NO_MATCHING_TERMS if tokens else NO_QUERY_TERMS
        if mask is not None and reason is None and not any_allowed:
            reason = FILTERED_OUT
        return Ranked(indices=indices, scores=top, requested=k, empty_reason=reason)


@dataclass
class BM25ArmSpec(BM25ArmConfig):
    """`arms.<name>` of a BM25 arm: its keyword arguments are its settings (k1, b, epsilon,
    impl, variant; `tokens`, `jieba` or `char_bigram`; `text`, a mapping over the job's
    `text.*`: `{hmm: false}`, `{use_lexicon: false}`, `{analyzer: cjk_bigram}`), typed by
    `config.bm25.BM25ArmConfig`, so BM25 arms that differ in scoring or in tokenisation run side
    by side (the built-in `bm25_nohmm`, `bm25_nolexicon`, `bm25_bigram`, `bm25_lucene`,
    `bm25_lucene_cjk`). Tokens come from the token cache under `cache_dir`, keyed by the
    tokenizer's identity; `text.analyzer` other than jieba tokenises with Lucene's analyzer of
    that name (text/lucene_analysis.py)."""

    def __post_init__(self) -> None:
        self.validate()  # a bad value fails when the config is read

    def check(self, name: str, ctx: BuildContext) -> None:
        """Before any arm builds: Lucene's formula needs the sparse implementation."""
        if self.variant == "lucene" and self.impl != "sparse":
            raise ConfigError(
                f"arms.{name}.impl",
                f"arms.{name}.variant=lucene is computed by impl=sparse only (rank_bm25 has no "
                "Lucene formula)",
            )

    def build(self, name: str, ctx: BuildContext) -> Arm:
        from retrieval_bench.text.lucene_analysis import analyzer
        from retrieval_bench.text.tokenizer import CharBigramTokenizer

        text = with_overrides(ctx.cfg.text, self.text)
        tokenizer: Tokenizer | CharBigramTokenizer | EnglishAnalyzer | CJKBigramAnalyzer
        if self.tokens == "char_bigram" or text.analyzer != "jieba":
            if self.tokens == "char_bigram":
                tokenizer = CharBigramTokenizer(text)
            else:  # one of Lucene's analyzers (text/lucene_analysis.py)
                tokenizer = analyzer(text.analyzer)
            start = time.perf_counter()
            tokens = _cached_tokens(ctx, tokenizer, text)
            tokens_s = time.perf_counter() - start
        else:
            tokenizer, tokens, tokens_s = jieba_tokens(ctx, text)
            if not self.text:
                # The manifest's `tokenizer`: the job's own `text` settings, recorded by the arm
                # that tokenises with them, so a job without such an arm loads no jieba; an arm
                # with its own records its tokenizer in its `info()`.
                ctx.stats["tokenizer"] = tokenizer.identity()
        retriever = BM25Retriever(ctx.ids, tokens, tokenizer.tokenize, self)
        retriever.tokenizer = tokenizer.identity()
        retriever.tokens_s = tokens_s
        return TextArm(retriever)


def jieba_tokens(ctx: BuildContext, text: TextConfig) -> tuple[Tokenizer, TokenizedCorpus, float]:
    """The corpus as a BM25 arm with `text` settings tokenises it (jieba with the dataset's
    lexicon; `text.impl=fast` checked against jieba on a sample), through the token cache:
    (tokenizer, tokens, seconds it took). Also what a learned router's term statistics read,
    so both share one cache entry."""
    from retrieval_bench.text.segment.parity import checked_tokenizer
    from retrieval_bench.text.tokenizer import cached_tokenizer, lexicon_of

    tokenizer = cached_tokenizer(text, *lexicon_of(ctx.entities))
    # text.impl=fast: jieba instead where the fast cut differs on a sample of this corpus.
    tokenizer = checked_tokenizer(tokenizer, ctx.texts, ctx.ids)
    start = time.perf_counter()
    tokens = _cached_tokens(ctx, tokenizer, text)
    return tokenizer, tokens, time.perf_counter() - start


def _cached_tokens(
    ctx: BuildContext,
    tokenizer: Tokenizer | CharBigramTokenizer | EnglishAnalyzer | CJKBigramAnalyzer,
    text: TextConfig,
) -> TokenizedCorpus:
    from retrieval_bench.text.token_cache import tokenize_corpus

    return tokenize_corpus(
        ctx.texts,
        tokenizer.tokenize,
        tokenizer.identity(),
        ctx.cache_dir / "tokens",
        text.resolved_workers(),
    )
