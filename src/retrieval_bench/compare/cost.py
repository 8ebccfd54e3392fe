"""Cost beside quality across a sweep: each configuration's costs (its job's manifest `cost`,
`job.cost`) and, per metric and query type, the Pareto front of quality against p95 latency
and against index size (`stats.pareto`), quality compared by the tiers' pairwise tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from retrieval_bench.jobdir.read import FinishedJob
from retrieval_bench.stats.pareto import pareto_front

# The costs a front is drawn against: key -> what it is, as the reports say it.
AXES = {
    "p95_ms": "p95 latency per query (ms, one query at a time, end to end)",
    "index_bytes": "index size in memory (bytes, every arm)",
}


def system_cost(job: FinishedJob) -> dict[str, Any] | None:
    """One job's costs for the comparison; None for a job recorded without them."""
    cost = job.manifest.get("cost")
    if not cost:
        return None
    total = cost.get("total") or {}
    latency = total.get("latency_ms") or {}
    machine = cost.get("machine") or {}
    gpus = machine.get("gpus") or []
    return {
        "p50_ms": latency.get("p50"),
        "p95_ms": latency.get("p95"),
        "probed_queries": (cost.get("probe") or {}).get("queries"),
        "index_bytes": total.get("index_bytes"),
        "disk_bytes": total.get("disk_bytes"),
        "build_cold_s": total.get("build_cold_s"),
        "peak_rss_bytes": total.get("peak_rss_bytes"),
        "machine": (
            f"{machine.get('cpu_model') or 'CPU unknown'}, {machine.get('cpu_cores')} cores, "
            f"GPU: {', '.join(gpus) if gpus else 'none'}"
        ),
    }


def beats_of(cell: Mapping[str, Any]) -> set[tuple[str, str]]:
    """(winner, loser) of every significant pairwise test of a tier cell."""
    out = set()
    for test in cell.get("tests") or []:
        if test.get("better"):
            loser = test["b"] if test["better"] == test["a"] else test["a"]
            out.add((test["better"], loser))
    return out


def front_of(costs: Mapping[str, float | None], cell: Mapping[str, Any]) -> dict[str, Any]:
    """The cell's front; none where no query was scored by every configuration."""
    if not cell.get("n"):
        return {"front": [], "dominated_by": {}, "unmeasured": [], "note": cell.get("note")}
    return pareto_front(costs, beats_of(cell))


def cost_record(jobs: Sequence[FinishedJob], tiers: Mapping[str, Any]) -> dict[str, Any]:
    """`systems` (label -> costs or None), `machines` (the distinct ones: costs measured on
    different machines do not compare) and `pareto` (axis -> metric -> type -> front)."""
    systems = {job.label: system_cost(job) for job in jobs}
    pareto: dict[str, dict[str, dict[str, Any]]] = {}
    for axis in AXES:
        costs = {label: (c or {}).get(axis) for label, c in systems.items()}
        pareto[axis] = {
            spec: {qtype: front_of(costs, cell) for qtype, cell in by_type.items()}
            for spec, by_type in tiers.items()
        }
    machines = sorted({c["machine"] for c in systems.values() if c})
    return {"axes": AXES, "systems": systems, "machines": machines, "pareto": pareto}
