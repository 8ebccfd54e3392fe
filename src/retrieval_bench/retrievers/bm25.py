"""BM25 with rank_bm25's BM25Okapi semantics, scored as a sparse matrix product.

rank_bm25 walks every document in Python for every query term; here the per-(term, passage)
weights are precomputed once, so a query costs one sparse row gather. Scores equal
rank_bm25's (tests compare them to 1e-9), including the epsilon floor: a term whose IDF is
negative gets `epsilon * mean(IDF over the vocabulary)`. `impl="rank_bm25"` runs the reference
itself.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy import sparse

from retrieval_bench.config.bm25 import BM25Config
from retrieval_bench.plugins import with_overrides
from retrieval_bench.progress import progress
from retrieval_bench.protocols import Arm, BuildContext
from retrieval_bench.records import FILTERED_OUT, NO_MATCHING_TERMS, NO_QUERY_TERMS, Ranked
from retrieval_bench.retrievers.base import TextArm
from retrieval_bench.retrievers.bm25_kernel import score_rows, top_rows
from retrieval_bench.text.token_cache import TokenizedCorpus
from retrieval_bench.tiebreak import shared_tie_break


class SparseBM25:
    """Exact BM25Okapi over a term x passage CSR matrix of idf x saturated, normalised tf.

    Bit-for-bit rank_bm25: each stored weight is computed with rank_bm25's expression and
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
    ) -> SparseBM25:
        """Index a corpus already mapped to term ids (`vocab[i]` in first-occurrence order,
        passage j's ids are the next `lengths[j]` of `term_ids`), e.g. from a token cache."""
        self = cls.__new__(cls)
        self._build(vocab, term_ids, lengths, config)
        return self

    def _build(
        self, vocab: Sequence[str], term_ids: np.ndarray, lengths: np.ndarray, config: BM25Config
    ) -> None:
        self.vocab = dict(zip(vocab, range(len(vocab)), strict=True))
        n_docs = len(lengths)
        if n_docs == 0:
            raise ValueError("BM25 needs at least one passage")
        doc_ids = np.repeat(np.arange(n_docs, dtype=np.int32), lengths)
        # (term, passage) pairs -> CSR; duplicate pairs sum into the term frequency.
        tf_matrix = sparse.csr_matrix(
            (np.ones(len(term_ids)), (term_ids, doc_ids)), shape=(len(vocab), n_docs)
        )
        tf_matrix.sum_duplicates()
        tf_matrix.sort_indices()
        doc_len = lengths.astype(np.float64)
        avgdl = int(lengths.sum()) / n_docs
        k1, b = config.k1, config.b
        tf = tf_matrix.data
        # rank_bm25's expression, term for term, so every weight is the same double.
        weight = tf * (k1 + 1) / (tf + k1 * (1 - b + b * doc_len[tf_matrix.indices] / avgdl))
        df = np.diff(tf_matrix.indptr)
        # math.log (not np.log, whose SIMD kernels may round differently) on each distinct df.
        distinct, inverse = np.unique(df, return_inverse=True)
        logs = [math.log(n_docs - f + 0.5) - math.log(f + 0.5) for f in distinct.tolist()]
        idf = np.asarray(logs, dtype=np.float64)[inverse]
        # rank_bm25 sums the IDFs one by one in vocabulary order; cumsum does the same.
        average_idf = float(np.cumsum(idf)[-1]) / len(idf) if len(idf) else 0.0
        idf[idf < 0] = config.epsilon * average_idf
        self.idf = idf
        self.average_idf = average_idf  # rank_bm25's attribute, for parity checks
        # Each stored value is idf * weight: the very product rank_bm25 forms per query term,
        # so a query only gathers and adds.
        tf_matrix.data = np.repeat(idf, df) * weight
        self.matrix = tf_matrix
        self.n_docs = n_docs
        self._indptr64 = tf_matrix.indptr.astype(np.int64)  # the compiled kernel's layout
        self.compiled = True  # False: the numpy path (tests compare both with rank_bm25)
        self._scratch = np.zeros(n_docs)
        self._scratch_lock = threading.Lock()

    def scores(self, query_tokens: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(scores over all passages, indices of passages sharing at least one query term)."""
        vocab = self.vocab
        # A token repeated in the query counts twice, as rank_bm25 iterates the query list.
        rows = [row for row in map(vocab.get, query_tokens) if row is not None]
        if not rows:
            return np.zeros(self.n_docs), np.empty(0, dtype=np.int64)
        return score_rows(self.matrix, self._indptr64, self.idf, rows, self.compiled)

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
        rows = [row for row in map(self.vocab.get, query_tokens) if row is not None]
        if not rows:
            empty = np.empty(0, dtype=np.int64)
            return empty, np.empty(0), False, False
        # One zeroed scratch vector per index, left zeroed by the kernel; a second caller at
        # the same moment (threads) gets its own.
        if self._scratch_lock.acquire(blocking=False):
            try:
                return top_rows(
                    self.matrix,
                    self._indptr64,
                    self.idf,
                    rows,
                    id_order,
                    k,
                    allowed,
                    self._scratch,
                )
            finally:
                self._scratch_lock.release()
        scratch = np.zeros(self.n_docs)
        return top_rows(self.matrix, self._indptr64, self.idf, rows, id_order, k, allowed, scratch)


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
        start = time.perf_counter()
        self.tokens_cached: bool | None = None
        if isinstance(corpus_tokens, TokenizedCorpus):
            self.tokens_cached = corpus_tokens.cached
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

    def index_info(self) -> dict[str, Any]:
        """For the manifest: which implementation, how big, how long it took to build."""
        info: dict[str, Any] = {
            "impl": self.config.impl,
            "passages": len(self.tie_break.id_order),
            "vocabulary": len(self.scorer.vocab),
            "build_s": round(self.build_s, 4),
            "tokens_from_cache": self.tokens_cached,
        }
        if isinstance(self.scorer, SparseBM25):
            matrix = self.scorer.matrix
            info["postings"] = int(matrix.nnz)
            info["bytes"] = int(
                matrix.data.nbytes
                + matrix.indices.nbytes
                + matrix.indptr.nbytes
                + self.scorer.idf.nbytes
            )
        return info

    def search(
        self, queries: Sequence[str], k: int, allowed: Sequence[np.ndarray | None]
    ) -> list[Ranked]:
        results = []
        pairs = zip(queries, allowed, strict=True)
        for query, mask in progress("ranking queries (bm25)", len(queries), "query", pairs):
            tokens = self.tokenize(query)
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
            results.append(Ranked(indices=indices, scores=top, requested=k, empty_reason=reason))
        return results


class BM25ArmSpec:
    """`arms.<name>` of a BM25 arm over jieba tokens: the job's `bm25` and `text` settings, with
    keyword overrides of `bm25` (k1, b, impl) so two BM25 arms can differ. Tokens come from the
    token cache under `cache_dir`."""

    def __init__(self, **overrides: Any) -> None:
        self.overrides = overrides
        with_overrides(BM25Config(), overrides)  # an unknown key fails when the config is read

    def build(self, name: str, ctx: BuildContext) -> Arm:
        from retrieval_bench.text.segment.parity import checked_tokenizer
        from retrieval_bench.text.token_cache import tokenize_corpus
        from retrieval_bench.text.tokenizer import cached_tokenizer, lexicon_of

        config = with_overrides(ctx.cfg.bm25, self.overrides)
        tokenizer = cached_tokenizer(ctx.cfg.text, *lexicon_of(ctx.entities))
        # text.impl=fast: jieba instead where the fast cut differs on a sample of this corpus.
        tokenizer = checked_tokenizer(tokenizer, ctx.texts, ctx.ids)
        # The manifest's `tokenizer`: recorded by the arm that tokenises, so a job without a
        # BM25 arm loads no jieba (every BM25 arm of a job shares `text`, hence one identity).
        ctx.stats["tokenizer"] = tokenizer.identity()
        tokens = tokenize_corpus(
            ctx.texts,
            tokenizer.tokenize,
            tokenizer.identity(),
            ctx.cache_dir / "tokens",
            ctx.cfg.text.resolved_workers(),
        )
        return TextArm(BM25Retriever(ctx.ids, tokens, tokenizer.tokenize, config))
