"""The class paths of the shipped plug-ins (what their nodes' `_target_` names), in one place:
the schema declares the shipped nodes with them and the renamed-keys mapping recognises a
user's copy of a shipped node by them. Strings only: nothing here imports a plug-in."""

from __future__ import annotations

BM25_SPEC = "retrieval_bench.retrievers.bm25.BM25ArmSpec"
LUCENE_SPEC = "retrieval_bench.retrievers.lucene.LuceneArmSpec"
DENSE_SPEC = "retrieval_bench.retrievers.dense.DenseArmSpec"
M3_SPEC = "retrieval_bench.retrievers.m3.M3Spec"
RUN_FILE_SPEC = "retrieval_bench.retrievers.run_file.RunFileArmSpec"
SERVICE_SPEC = "retrieval_bench.retrievers.service.ServiceArmSpec"
RRF = "retrieval_bench.fusion.rrf.ReciprocalRankFusion"
SCORE_FUSION = "retrieval_bench.fusion.score.ScoreFusion"
FILL = "retrieval_bench.fusion.fill.Fill"
RERANK = "retrieval_bench.stages.rerank.CrossEncoderRerank"
CUT = "retrieval_bench.stages.cut.TopKCut"
CONTEXT = "retrieval_bench.stages.context.ContextBudget"
