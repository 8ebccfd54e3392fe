"""How every paired comparison in a report is tested: one frozen record of the `compare:` node's
test settings, passed to the paired test, its corrections and its power, and echoed into each
report so a reader sees how its verdicts were reached."""

from __future__ import annotations

from dataclasses import dataclass

from retrieval_bench.config.compare import CompareConfig


@dataclass(frozen=True)
class SignificanceSettings:
    """How every paired comparison in a report is tested; echoed into the report."""

    alpha: float = 0.05
    n_resamples: int = 10000
    confidence: float = 0.95
    seed: int = 0
    # Multiple-testing correction of a family: "holm" or "bh" (`CORRECTIONS`).
    correction: str = "holm"
    # Power analysis (`stats.power`): the power a minimum detectable effect is stated at,
    # and the difference the "queries needed" are for.
    power: float = 0.8
    target_delta: float = 0.05


def significance_settings(cfg: CompareConfig) -> SignificanceSettings:
    """The settings of a `compare:` node (every comparison, and a job's robustness tests)."""
    return SignificanceSettings(
        alpha=cfg.alpha,
        n_resamples=cfg.n_resamples,
        confidence=cfg.confidence,
        seed=cfg.seed,
        correction=cfg.correction,
        power=cfg.power,
        target_delta=cfg.target_delta,
    )
