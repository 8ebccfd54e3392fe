"""The rerank stage: a cross-encoder rescores the top `stages.rerank.depth` passages of each
query's combined ranking, before the top_k cut.

The model is FlagEmbedding's `FlagReranker` (an encoder-only cross-encoder such as
BAAI/bge-reranker-v2-m3), found and loaded the way the encoders are (`encoders.flag`): offline
unless `stages.rerank.allow_download`, resolved when the stage is built (so a missing model fails
before any retrieval, naming the ways out), loaded on first use and shared by the jobs of a
multirun. Every query's pairs go to the model in one call, which sorts them by length and
batches them. The stage's scores are the model's raw relevance logits, so `refusal` can
threshold them; ties are broken by the project's TieBreak (id descending).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from retrieval_bench.config.stages import RerankConfig
from retrieval_bench.protocols import BEFORE_CUT

if TYPE_CHECKING:
    from retrieval_bench.protocols import BuildContext
from retrieval_bench.encoders.flag import (
    ModelRole,
    ResolvedModel,
    batches_reported,
    load_offline,
    load_shared,
    model_token_limit,
    resolve_model,
)
from retrieval_bench.records import EvalQuery, Ranked
from retrieval_bench.tiebreak import TieBreak

log = logging.getLogger(__name__)

RERANKER_ROLE = ModelRole(
    "stages.rerank", "run without a rerank stage: leave stages.rerank.model empty (reranker=none)"
)


@dataclass
class CrossEncoderRerank(RerankConfig):
    """`stages.rerank`: a StageSpec before the top_k cut, on when its `model` names one. Its
    keyword arguments are `config.stages.RerankConfig`'s fields (`stages.rerank_small:
    {_target_: ...CrossEncoderRerank, model: DIR, depth: 20}` is a second reranker)."""

    placement: ClassVar[str] = BEFORE_CUT

    def __post_init__(self) -> None:
        self.validate()  # a bad value fails when the config is read

    def active(self, ctx: BuildContext) -> bool:
        return self.enabled

    def check(self, name: str, ctx: BuildContext) -> None:
        """The devices present, the depth against the pool and top_k, and the model found on
        disk, before any arm encodes the corpus."""
        self.check_for_job(ctx.cfg.retriever.pool_size, ctx.cfg.top_k, f"stages.{name}.")
        resolve_model(self.model, self.allow_download, RERANKER_ROLE)

    def build(self, name: str, ctx: BuildContext) -> CrossEncoderReranker:
        return CrossEncoderReranker(
            self, ctx.texts, ctx.tie_break, length_key=f"stages.{name}.max_length"
        )


class CrossEncoderReranker:
    """The rerank stage itself: the model's order of each ranking's top `depth`.

    A (query, passage) pair is cut to `max_length` tokens: `cfg.max_length`, or the model's
    own limit where that is lower (`encoders.flag.model_token_limit`: its position embeddings,
    its tokenizer's `model_max_length`), since FlagEmbedding fails on a longer pair (a model
    with 130 positions given the default 512). `length_key` names the setting in the note that
    says so (`stages.rerank.max_length`, the judge's `--max-length`); `asked`: whether the user set
    it (a default above the model's limit is taken down quietly, a value they set is not)."""

    def __init__(
        self,
        cfg: RerankConfig,
        texts: Sequence[str],
        tie_break: TieBreak,
        length_key: str = "stages.rerank.max_length",
        asked: bool | None = None,
    ) -> None:
        self.cfg = cfg
        self.texts = texts
        self.tie_break = tie_break
        self.resolved: ResolvedModel = resolve_model(cfg.model, cfg.allow_download, RERANKER_ROLE)
        self.model_limit = model_token_limit(self.resolved.path)
        self.max_length = cfg.max_length
        if self.model_limit is not None and cfg.max_length > self.model_limit:
            self.max_length = self.model_limit
            if asked is None:
                asked = cfg.max_length != RerankConfig().max_length
            (log.warning if asked else log.info)(
                "%s=%d is more than %s takes (%d tokens): pairs are cut to %d",
                length_key,
                cfg.max_length,
                self.resolved.name,
                self.model_limit,
                self.model_limit,
            )
        self.pairs_scored = 0
        self.seconds = 0.0

    @property
    def model(self) -> Any:
        """The loaded FlagReranker, shared per process with the encoders' memo."""
        resolved = self.resolved
        key = (
            "cross_encoder",
            str(resolved.path),
            resolved.fingerprint,
            self.cfg.precision,
            tuple(self.cfg.devices),
        )

        def load() -> Any:
            from FlagEmbedding import FlagReranker

            log.info("loading reranker %s (%s)", resolved.name, ", ".join(self.cfg.devices))
            return FlagReranker(
                str(resolved.path),
                use_fp16=self.cfg.precision == "fp16",
                devices=list(self.cfg.devices),
                batch_size=self.cfg.batch_size,
                max_length=self.max_length,
                trust_remote_code=False,
            )

        return load_shared(
            key,
            lambda: load_offline(
                self.cfg.model,
                resolved,
                "cross_encoder",
                self.cfg.allow_download,
                RERANKER_ROLE,
                load,
            ),
        )

    def score(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        """The model's relevance logit of each (query, passage text) pair."""
        if not pairs:
            return np.zeros(0, dtype=np.float64)
        model = self.model
        if len(self.cfg.devices) > 1 and model.pool is None:
            # Started here, outside the progress swap below (which reports batches, not the
            # workers' start-up); the workers score their share of the pairs each call.
            model.pool = model.start_multi_process_pool()
        with batches_reported(model, "reranking", "pair", len(pairs)):
            scores = model.compute_score(
                pairs,
                batch_size=self.cfg.batch_size,
                max_length=self.max_length,
                normalize=False,
            )
        out = np.atleast_1d(np.asarray(scores, dtype=np.float64))
        if out.shape != (len(pairs),):
            raise RuntimeError(f"reranker returned {out.shape} scores for {len(pairs)} pairs")
        return out

    def apply(self, queries: Sequence[EvalQuery], rankings: Sequence[Ranked]) -> list[Ranked]:
        """Each ranking's top `depth` in the model's order, with the model's scores."""
        start = time.perf_counter()
        heads = [ranked.indices[: self.cfg.depth] for ranked in rankings]
        pairs = [
            (query.query, self.texts[i])
            for query, head in zip(queries, heads, strict=True)
            for i in head.tolist()
        ]
        scores = self.score(pairs)
        out = []
        offset = 0
        for ranked, head in zip(rankings, heads, strict=True):
            head_scores = scores[offset : offset + len(head)]
            offset += len(head)
            indices, ordered = self.tie_break.top(head, head_scores, len(head))
            out.append(
                Ranked(
                    indices=indices,
                    scores=ordered,
                    requested=self.cfg.depth,
                    empty_reason=None if len(head) else ranked.empty_reason,
                )
            )
        self.pairs_scored += len(pairs)
        self.seconds += time.perf_counter() - start
        return out

    def info(self) -> dict[str, Any]:
        """What the manifest records: the model (and its files' fingerprint) and the work done."""
        return {
            "kind": "cross_encoder",
            "model": self.resolved.name,
            "weights": self.resolved.fingerprint,
            "depth": self.cfg.depth,
            "max_length": self.max_length,
            "model_max_length": self.model_limit,
            "precision": self.cfg.precision,
            "devices": list(self.cfg.devices),
            "pairs_scored": self.pairs_scored,
            "seconds": round(self.seconds, 4),
        }
