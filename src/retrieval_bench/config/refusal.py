"""The refusal evaluation's typed settings (`refusal.*`); `scoring.refusal` computes it."""

from __future__ import annotations

from dataclasses import dataclass

from retrieval_bench.errors import ConfigError

# The `refusal.score_stage` that picks the first of rerank, the dense arm, bm25 every query
# recorded, else final (scoring.refusal.choose_stage).
AUTO = "auto"


@dataclass
class RefusalConfig:
    """The `refusal:` config node."""

    score_stage: str = AUTO
    """Whose top score decides answer-or-refuse: auto, or any recorded stage (an arm's name,
    fused, rerank, final, context); checked against the stages the job records."""
    thresholds: int = 21
    """Rows of the threshold table (evenly spaced over the observed top scores)."""

    def validate(self) -> None:
        if not self.score_stage.strip():
            raise ConfigError("refusal.score_stage", "must name a stage, or auto")
        if self.thresholds < 2:
            raise ConfigError("refusal.thresholds", f"must be >= 2, got {self.thresholds}")
