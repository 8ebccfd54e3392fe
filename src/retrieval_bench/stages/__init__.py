"""The built-in later stages, each a plug-in named by `stages.<name>._target_`
(config.schema.BUILTIN_STAGES) and placed by its class (or its node's `after`):

    rerank   a cross-encoder rescores the top `depth` (rerank.py), before the cut
    final    the cut to top_k (cut.py)
    context  what fits a character budget and a per-document cap (context.py), after the cut

Each module imports its model library only when its stage is built, so a job without a
reranker never imports FlagEmbedding.
"""
