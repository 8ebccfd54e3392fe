"""BGE-M3 arms: its dense, sparse (lexical weights) and multi-vector (ColBERT) outputs, one
arm each, and `m3`, their weighted sum, all from one encode of the corpus.

Every score is FlagEmbedding's own (tests/unit/retrievers/test_m3_arms.py checks them against
`BGEM3FlagModel.compute_score`, `compute_lexical_matching_score` and `colbert_score`), computed
for all candidates at once instead of pair by pair:

* dense: inner product of the unit dense vectors;
* sparse: sum over shared tokens of query weight x passage weight (a sparse matrix product);
* ColBERT: for each query token the best inner product with any passage token, averaged over
  the query's tokens (maxsim);
* `m3`: (w_dense * dense + w_sparse * sparse + w_colbert * colbert) / sum(w), with
  `arms.m3.weights` = FlagEmbedding's `weights_for_different_modes`. BGE-M3 scores each candidate
  with all three outputs before it sums them, so the `m3` arm does too: a passage's fused score
  never misses a term because one output ranked it low.

Cost: dense and sparse are one product over the corpus per query. ColBERT multiplies the
query's tokens with every token of every allowed passage (about 200 tokens x 1024 dims each for
BGE-M3), which is fine for evaluation corpora of thousands of passages; for larger ones
`arms.m3.colbert_depth=N` scores ColBERT (and the weighted sum) over the union of each query's dense
and sparse top N only, as BGE-M3's authors re-rank a first-stage candidate list.

The arms of a job share one `M3Outputs` of the corpus (a per-process memo keyed by the cache
key, so a multirun's jobs share it too) and one on-disk cache entry (encoders/m3.py).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse

from retrieval_bench.config.m3 import M3ArmConfig
from retrieval_bench.encoders.cache import CacheStats
from retrieval_bench.encoders.m3 import M3Cache, M3Encoder, M3Outputs
from retrieval_bench.errors import ConfigError
from retrieval_bench.progress import progress
from retrieval_bench.protocols import BuildContext
from retrieval_bench.records import (
    FILTERED_OUT,
    NO_MATCHING_TERMS,
    NO_QUERY_TERMS,
    EvalQuery,
    Ranked,
)
from retrieval_bench.tiebreak import TieBreak

CACHE_SUBDIR = "m3"
_MEMO_SIZE = 4
_MEMO_LOCK = threading.Lock()
_MEMO: OrderedDict[str, M3Outputs] = OrderedDict()


def clear_m3_memo() -> None:
    """Forget the corpora's outputs held in memory (the next job reads the disk cache)."""
    with _MEMO_LOCK:
        _MEMO.clear()


class M3Scorer:
    """The three BGE-M3 scores of one query against chosen passages of one corpus."""

    def __init__(self, corpus: M3Outputs) -> None:
        self.corpus = corpus
        self.vocab = int(corpus.sparse_indices.max(initial=-1)) + 1
        self.sparse_matrix = scipy.sparse.csr_matrix(
            (corpus.sparse_data, corpus.sparse_indices, corpus.sparse_indptr),
            shape=(len(corpus), self.vocab),
        )
        self.lengths = np.diff(corpus.colbert_offsets)

    # `candidates`: sorted distinct passage indices (so as many as the corpus means all of it).
    def dense(self, query: M3Outputs, qi: int, candidates: np.ndarray) -> np.ndarray:
        return (_rows(self.corpus.dense, candidates) @ query.dense[qi]).astype(np.float64)

    def sparse(self, query: M3Outputs, qi: int, candidates: np.ndarray) -> np.ndarray:
        start, end = query.sparse_indptr[qi], query.sparse_indptr[qi + 1]
        tokens, weights = query.sparse_indices[start:end], query.sparse_data[start:end]
        known = tokens < self.vocab  # a token no passage has contributes nothing
        q = np.zeros(self.vocab, dtype=np.float32)
        q[tokens[known]] = weights[known]
        return np.asarray(_rows(self.sparse_matrix, candidates) @ q, dtype=np.float64)

    def colbert(self, query: M3Outputs, qi: int, candidates: np.ndarray) -> np.ndarray:
        """Maxsim: each query token's best inner product with a passage token, averaged."""
        q = query.colbert(qi)
        if not len(candidates):
            return np.zeros(0, dtype=np.float64)
        if len(candidates) == len(self.corpus):  # every passage: no gather of token rows
            tokens, starts = self.corpus.colbert_vectors, self.corpus.colbert_offsets[:-1]
        else:
            lengths = self.lengths[candidates]
            starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
            rows = np.repeat(self.corpus.colbert_offsets[candidates] - starts, lengths)
            tokens = self.corpus.colbert_vectors[rows + np.arange(len(rows))]
        best = np.maximum.reduceat(tokens @ q.T, starts, axis=0)  # (passages, query tokens)
        return (best.sum(axis=1) / len(q)).astype(np.float64)


def _rows(matrix: Any, candidates: np.ndarray) -> Any:
    """The candidates' rows; the matrix itself (no copy) when they are all of it."""
    return matrix if len(candidates) == matrix.shape[0] else matrix[candidates]


@dataclass
class M3Arm:
    """One BGE-M3 arm: ranks every allowed passage by `mode`'s score (module doc)."""

    name: str
    mode: str
    weights: tuple[float, float, float]
    colbert_depth: int
    scorer: M3Scorer
    queries: _QueryOutputs
    tie_break: TieBreak
    stats: dict[str, Any]

    def search(
        self, queries: Sequence[EvalQuery], k: int, allowed: Sequence[np.ndarray | None]
    ) -> list[Ranked]:
        encoded = self.queries.lookup([q.query for q in queries])
        n = len(self.scorer.corpus)
        everything = np.arange(n, dtype=np.int64)
        out = []
        with progress(f"ranking queries ({self.name})", len(queries), "query") as bar:
            for qi, mask in enumerate(allowed):
                candidates = everything if mask is None else np.flatnonzero(mask)
                query, row = encoded[qi]
                out.append(self._rank(query, row, candidates, k))
                bar.update(1)
        return out

    def _rank(self, query: M3Outputs, qi: int, candidates: np.ndarray, k: int) -> Ranked:
        if not len(candidates):
            return _empty(k, FILTERED_OUT)
        scorer = self.scorer
        if self.mode == "dense":
            scores = scorer.dense(query, qi, candidates)
        elif self.mode == "sparse":
            if query.sparse_indptr[qi] == query.sparse_indptr[qi + 1]:
                return _empty(k, NO_QUERY_TERMS)
            candidates, scores = self._sparse_pool(query, qi, candidates)
            if not len(candidates):
                return _empty(k, NO_MATCHING_TERMS)
        else:
            if self.colbert_depth:
                candidates = self._first_stage(query, qi, candidates)
            if self.mode == "colbert":
                scores = scorer.colbert(query, qi, candidates)
            else:
                # A zero weight skips its score (weights [1, 1, 0]: no ColBERT cost at all).
                terms = zip(
                    self.weights, (scorer.dense, scorer.sparse, scorer.colbert), strict=True
                )
                scores = sum(
                    (w * score(query, qi, candidates) for w, score in terms if w),
                    np.zeros(len(candidates)),
                ) / sum(self.weights)
        indices, top = self.tie_break.top(candidates, scores, k)
        return Ranked(indices=indices, scores=top, requested=k)

    def _first_stage(self, query: M3Outputs, qi: int, candidates: np.ndarray) -> np.ndarray:
        """The union of the dense and sparse arms' top `colbert_depth` among `candidates`."""
        depth = self.colbert_depth
        dense = self.tie_break.top(candidates, self.scorer.dense(query, qi, candidates), depth)
        sparse = self.tie_break.top(*self._sparse_pool(query, qi, candidates), depth)
        return np.union1d(dense[0], sparse[0])

    def _sparse_pool(
        self, query: M3Outputs, qi: int, candidates: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The candidates sharing a token with the query (a passage that shares none is not
        retrieved by lexical matching), and their scores."""
        scores = self.scorer.sparse(query, qi, candidates)
        matched = scores > 0
        return candidates[matched], scores[matched]

    def info(self) -> dict[str, Any]:
        info: dict[str, Any] = {"kind": "bge_m3", "mode": self.mode, **self.stats}
        if self.mode == "all":
            info["weights"] = {
                "dense": self.weights[0],
                "sparse": self.weights[1],
                "colbert": self.weights[2],
            }
        if self.mode in ("colbert", "all"):
            info["colbert_depth"] = self.colbert_depth or "all"
        return info


def _empty(k: int, reason: str) -> Ranked:
    return Ranked(np.empty(0, np.int64), np.empty(0, np.float64), requested=k, empty_reason=reason)


@dataclass(kw_only=True)
class M3Spec(M3ArmConfig):
    """`arms.<name>: {_target_: retrieval_bench.retrievers.m3.M3Spec, mode: ..., ...}`: one
    BGE-M3 arm; its keyword arguments are `config.m3.M3ArmConfig`'s fields (`mode`, the model
    keys, `weights`, `colbert_depth`), so differently weighted or different models run side by
    side. Arms of one model share one encode of the corpus."""

    def __post_init__(self) -> None:
        self.validate()  # a bad value fails when the config is read

    def check(self, name: str, ctx: BuildContext) -> None:
        """The devices present and the model found on disk (no load), before any arm of the job
        indexes or encodes; errors name the arm's own keys."""
        encoder_cfg = self.encoder_config()
        try:
            M3Encoder.check_config(encoder_cfg)
        except ConfigError as exc:
            raise ConfigError(
                f"arms.{name}.{exc.key.removeprefix('encoder.')}",
                exc.message.replace("encoder.", f"arms.{name}."),
            ) from exc
        M3Encoder(encoder_cfg).resolve()

    def build(self, name: str, ctx: BuildContext) -> M3Arm:
        cfg = self
        encoder = M3Encoder(cfg.encoder_config())
        cache = M3Cache(Path(ctx.cache_dir) / CACHE_SUBDIR)
        corpus = _shared_outputs(ctx, cache, encoder, ctx.texts, "passages")
        query_texts = list(dict.fromkeys(q.query for q in ctx.queries))
        queries = _shared_outputs(ctx, cache, encoder, query_texts, "queries")
        weights = cfg.weights
        return M3Arm(
            name=name,
            mode=self.mode,
            weights=(weights[0], weights[1], weights[2]),
            colbert_depth=cfg.colbert_depth,
            scorer=M3Scorer(corpus),
            queries=_QueryOutputs(queries, query_texts, cache, encoder, ctx),
            tie_break=ctx.tie_break,
            stats={"model": encoder.identity()["model"]},
        )


def _count(ctx: BuildContext, key: str, role: str, stats: CacheStats) -> None:
    """Add to the manifest's `embeddings.m3_<role>` once per cache entry per job: the arms of a
    job share one encode, so the second arm's memory hit is not counted again."""
    counted: list[str] = ctx.stats.setdefault("m3_cache_keys", [])
    if key in counted:
        return
    counted.append(key)
    embeddings = ctx.stats.setdefault("embeddings", {})
    totals = embeddings.setdefault(f"m3_{role}", {"encoded": 0, "cached": 0})
    totals["encoded"] += stats.encoded
    totals["cached"] += stats.cached


class _QueryOutputs:
    """The outputs of the job's queries (encoded at build), and of any other text an arm is
    asked (encoded then, through the cache, and counted)."""

    def __init__(
        self,
        known: M3Outputs,
        texts: list[str],
        cache: M3Cache,
        encoder: M3Encoder,
        ctx: BuildContext,
    ) -> None:
        self.sources = [known]
        self.rows = {text: (0, i) for i, text in enumerate(texts)}
        self.cache, self.encoder, self.ctx = cache, encoder, ctx

    def lookup(self, texts: Sequence[str]) -> list[tuple[M3Outputs, int]]:
        """For each text: the outputs holding it and its row there."""
        missing = [t for t in dict.fromkeys(texts) if t not in self.rows]
        if missing:
            outputs, stats = self.cache.encode(self.encoder, missing, "queries")
            _count(self.ctx, stats.key, "queries", stats)
            self.sources.append(outputs)
            self.rows.update({t: (len(self.sources) - 1, i) for i, t in enumerate(missing)})
        return [(self.sources[s], row) for s, row in (self.rows[t] for t in texts)]


def _shared_outputs(
    ctx: BuildContext, cache: M3Cache, encoder: M3Encoder, texts: list[str], role: str
) -> M3Outputs:
    """Outputs from the per-process memo (counted as cached), else the disk cache or the
    model; the arms of a job, and the jobs of a multirun, encode each text list once."""
    key = cache.key(encoder, texts, role)
    with _MEMO_LOCK:
        found = _MEMO.get(key)
    if found is not None:
        _count(ctx, key, role, CacheStats(0, len(texts), key))
        return found
    outputs, stats = cache.encode(encoder, texts, role, key)
    _count(ctx, key, role, stats)
    _remember(key, outputs)
    return outputs


def _remember(key: str, outputs: M3Outputs) -> None:
    with _MEMO_LOCK:
        _MEMO[key] = outputs
        _MEMO.move_to_end(key)
        while len(_MEMO) > _MEMO_SIZE:
            _MEMO.popitem(last=False)
