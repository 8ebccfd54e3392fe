"""Wall time of each plug-in's calls in a job's pipeline, by kind (arms, combiners, stages)
and name: what the batch run cost, beside the per-query latency the probe measures
(`job.latency`)."""

from __future__ import annotations

import time
from typing import Any


class PluginTiming:
    def __init__(self) -> None:
        self.by_kind: dict[str, dict[str, dict[str, Any]]] = {}

    def add(self, kind: str, name: str, queries: int, start: float) -> None:
        """One call of `name` on `queries` queries that began at `start` (perf_counter)."""
        entry = self.by_kind.setdefault(kind, {}).setdefault(
            name, {"seconds": 0.0, "queries": 0, "calls": 0}
        )
        entry["seconds"] += time.perf_counter() - start
        entry["queries"] += queries
        entry["calls"] += 1

    def to_json(self) -> dict[str, dict[str, dict[str, Any]]]:
        """Per kind and name: seconds, queries, calls and ms per query (the batch's mean)."""
        return {
            kind: {
                name: {
                    **entry,
                    "seconds": round(entry["seconds"], 6),
                    "ms_per_query": round(1000 * entry["seconds"] / entry["queries"], 4)
                    if entry["queries"]
                    else None,
                }
                for name, entry in names.items()
            }
            for kind, names in self.by_kind.items()
        }
