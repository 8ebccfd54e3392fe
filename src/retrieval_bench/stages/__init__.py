"""The stages after fusion: `rerank` (before the top_k cut) and `context` (after it).

`build_later_stages(cfg, ctx)` turns the `reranker:` and `context:` config nodes into the
pipeline's two LaterStages (None where a stage is off). The implementations are imported only
when their stage is on, so a job without a reranker never imports FlagEmbedding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from retrieval_bench.protocols import BuildContext, LaterStage

if TYPE_CHECKING:
    from retrieval_bench.config import RunConfig


def build_later_stages(
    cfg: RunConfig, ctx: BuildContext
) -> tuple[LaterStage | None, LaterStage | None]:
    """(rerank, context) for the job configured by `cfg` over the corpus in `ctx`. Raises
    ConfigError for a context budget below the corpus's shortest passage and EncoderUnavailable
    for a reranker model that is not there, both before any retrieval."""
    rerank: LaterStage | None = None
    context: LaterStage | None = None
    if cfg.context.enabled:
        from retrieval_bench.stages.context import ContextBuilder

        context = ContextBuilder(cfg.context, ctx.passages, ctx.texts)
    if cfg.reranker.enabled:
        from retrieval_bench.stages.rerank import CrossEncoderReranker

        rerank = CrossEncoderReranker(cfg.reranker, ctx.texts, ctx.tie_break)
    return rerank, context
