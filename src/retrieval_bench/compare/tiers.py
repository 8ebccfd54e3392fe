"""The tiers of a comparison (`stats.tiers`): per metric and query type, which configurations
the data cannot separate, and each one's rank interval; with how they were computed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from retrieval_bench.config.compare import CompareConfig
from retrieval_bench.scoring.registry import lower_is_better
from retrieval_bench.stats.settings import SignificanceSettings
from retrieval_bench.stats.tiers import tier_cells
from retrieval_bench.stats.verdicts import family_key

Table = Mapping[tuple[str, str], Mapping[str, Mapping[str, float]]]


def tier_record(table: Table, cfg: CompareConfig, sig: SignificanceSettings) -> dict[str, Any]:
    """metric spec -> type -> the TierCell's JSON, for every (spec, type) of `table`."""
    cells = tier_cells(
        table,
        sig,
        cfg.min_queries,
        family_key(cfg.family),
        lambda key: lower_is_better(key[0]),
        cfg.rank_resamples,
    )
    out: dict[str, dict[str, Any]] = {}
    for (spec, qtype), cell in cells.items():
        out.setdefault(spec, {})[qtype] = cell.to_json()
    return out


def tier_settings(cfg: CompareConfig) -> dict[str, Any]:
    """How the tiers were made, for comparison.json's `settings` (and the reports' lines)."""
    tail = (1 - cfg.confidence) / 2
    return {
        "tiers": (
            "every pair of configurations tested (the sign-flip test above), adjusted by "
            "the correction over the same family; X beats Y when its adjusted p < alpha and "
            "its mean is better; tier 1 = every configuration no other beats, removed, and "
            "repeated on the rest"
        ),
        "rank_resamples": cfg.rank_resamples,
        "rank_interval": (
            f"percentile bootstrap of each configuration's competition rank (1 + those with "
            f"a strictly better mean): {cfg.rank_resamples} resamples of the group's paired "
            f"queries with replacement, numpy default_rng(seed={cfg.seed}), the {tail:g} and "
            f"{1 - tail:g} quantiles (inverted CDF)"
        ),
    }
