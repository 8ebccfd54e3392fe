"""A finished job in memory: its dataset, labels, every query's records and the metrics; what
reports and outputs read (they import this, never the experiment that ran the job)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from retrieval_bench.records import Dataset, QueryRecord
from retrieval_bench.scoring.labels import Judgements


@dataclass
class JobResult:
    dataset: Dataset
    judgements: Judgements
    records: list[QueryRecord]
    metrics: dict[str, Any]
    timings: dict[str, float] = field(default_factory=dict)
    embeddings: dict[str, dict[str, int]] = field(default_factory=dict)
    # The BM25 arms' tokenizer identity (Tokenizer.identity()); empty when no arm tokenised.
    tokenizer: dict[str, Any] = field(default_factory=dict)
    # Per arm: what index was built and how it behaved (e.g. dense recall against exact).
    indexes: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Per later stage (rerank, final, context, ...): its settings and what it did (Stage.info()).
    stages: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Arms that rank with their own access rules (`applies_own_acl`): the filter was not imposed
    # on them, and leak@K measures what they let through (job.contract).
    own_acl_arms: list[str] = field(default_factory=list)
    # What the quality cost, per arm and stage, and the machine (job.cost.job_cost).
    cost: dict[str, Any] = field(default_factory=dict)
    # router=learned: the router fitted on every labelled query (RouterModel.to_json), saved
    # with the job; None otherwise, and when the job applied a saved one.
    router_model: dict[str, Any] | None = None

    def to_dataframe(self, system: str | None = None) -> Any:
        """The job's metrics as the long pandas table of results.csv (one row per system x
        stage x query x metric, then the aggregates); `system` names the rows (default "run").
        pandas is optional, imported only here (the `tables` extra)."""
        from retrieval_bench.scoring.table import metrics_frame

        return metrics_frame(self.metrics, system or "run")
