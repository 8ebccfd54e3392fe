"""The `cost:` config node: how a job measures what its quality costs (`job.cost`)."""

from __future__ import annotations

from dataclasses import dataclass

from retrieval_bench.errors import ConfigError


@dataclass
class CostConfig:
    latency_queries: int = 30
    """Queries timed one at a time through every arm, the combiner and every stage after the
    batch run (`job.latency`): the per-query latency a served system would see. Spread evenly
    over the evaluation set; 0 turns the probe off (no p50/p95 then). Each costs a fresh encode
    on a dense arm (tens of ms with USE on one core), so the default keeps a travel job's probe
    to a few seconds; more queries give a steadier p95."""

    def validate(self) -> None:
        if self.latency_queries < 0:
            raise ConfigError(
                "cost.latency_queries", f"must be >= 0 (0: no probe), got {self.latency_queries}"
            )
