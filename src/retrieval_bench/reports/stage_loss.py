"""report.md's "where labelled passages were lost" table (metrics.json `stage_loss`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from retrieval_bench.reports.tables import markdown_table, paragraphs


def stage_loss_section(loss: Mapping[str, Any] | None) -> list[str]:
    """One row per query type, then `all`: labelled relevant passages, and how many were lost
    at each checkpoint (pool, then the later stages) or kept to the last one."""
    if not loss or not loss["overall"]["labelled"]:
        return []
    columns = [*loss["checkpoints"], "kept"]
    header = ["type", "queries", "labelled", *(f"lost at {c}" for c in columns[:-1]), "kept"]
    rows = []
    for name, group in [*loss["by_type"].items(), ("all", loss["overall"])]:
        rows.append(
            [name, group["queries"], group["labelled"], *(group["lost_at"][c] for c in columns)]
        )
    return paragraphs(
        "## Where labelled passages were lost",
        "Each labelled relevant passage of each scored query, counted at the first stage whose "
        "ranking no longer holds it: `pool` = in no arm's candidate pool (never retrieved); "
        "`fused`/`rerank` = cut by fusion or by the reranker (its depth, then its order); "
        "`final` = below the top_k cut; `context` = left out by the context budget or the "
        "per-document cap; `kept` = in the last stage. Per query: metrics.json "
        "`stage_loss.per_query`.",
        markdown_table(header, rows),
    )
