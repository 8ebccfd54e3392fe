"""What a job's quality cost, per arm and stage, beside the machine it ran on: the manifest's
`cost` record, which report.md's cost tables and a sweep's Pareto fronts read.

Per component (each arm, the combiner, each later stage; a learned router's choice, `router`,
with its `features` and `choose` parts, on probed queries only):

* `latency_ms`: one query at a time (`job.latency`): p50/p95/max/mean of the component, and of
  its `encode` and `search` parts where the arm knows them;
* `batch`: the batch run's wall time of its calls (`job.timing`), and ms per query;
* arms only, `build`: the arm's own record (`info()["cost"]`): its "prepare" step (encoding
  or tokenising the passages) this run (`prepare_s`, from the cache or computed now:
  `prepare_source`) and cold (`prepare_cold_s`: measured now, or when the cache entry was
  written), passages per cold second, the index's build time (`index_s`), its bytes in memory
  (`index_bytes`) and the cache files on disk (`disk_bytes`); and the arm's whole build
  (`build_s`) with the process's peak resident memory during it (`peak_rss_bytes`, everything
  loaded before included) and its growth (`rss_growth_bytes`).

`total`: the end-to-end latency, the arms' index bytes and disk bytes summed, their cold build
time summed (prepare cold + index: what building the job from nothing costs), and the job's
peak resident memory; a sum with an unknown part (an arm that does not measure it) is null.
`machine`: CPU model, cores, memory, GPUs. Unknown is null, never 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PROBE_OFF = "cost.latency_queries=0: no per-query latency probe"


def _sum(values: list[Any]) -> float | None:
    """The sum, or None when any value is unknown (an arm that does not measure it, a cache
    entry written before cold times were recorded): a total never hides a part."""
    if not values or not all(isinstance(v, (int, float)) for v in values):
        return None
    return float(sum(values))


def arm_build(info: Mapping[str, Any], memory: Mapping[str, Any] | None) -> dict[str, Any]:
    """An arm's build record: its own `cost` (prepare, index, sizes) and its build phase."""
    own = dict(info.get("cost") or {})
    cold, passages = own.get("prepare_cold_s"), own.get("passages")
    if isinstance(cold, (int, float)) and cold > 0 and isinstance(passages, int):
        own["passages_per_s"] = round(passages / cold, 2)
    if memory:
        own["build_s"] = memory.get("seconds")
        own["peak_rss_bytes"] = memory.get("peak_rss_bytes")
        own["rss_growth_bytes"] = memory.get("rss_growth_bytes")
    return own


def job_cost(
    machine: Mapping[str, Any],
    batch: Mapping[str, Mapping[str, Mapping[str, Any]]],
    arm_infos: Mapping[str, Mapping[str, Any]],
    probe: Mapping[str, Any] | None,
    build_phases: Mapping[str, Mapping[str, Any]],
    peak: Mapping[str, Any],
) -> dict[str, Any]:
    """The manifest's `cost` record (layout: the module docstring). `batch`: PluginTiming's
    JSON; `probe`: `job.latency.probe_latency`'s record (None: probe off); `build_phases`:
    the MemoryMeter's phases, `index_<arm>` per arm; `peak`: the job's peak memory."""
    probed = (probe or {}).get("components") or {}
    components: dict[str, dict[str, Any]] = {}
    for kind, plural in (("arm", "arms"), ("combiner", "combiners"), ("stage", "stages")):
        for name, timing in (batch.get(plural) or {}).items():
            entry: dict[str, Any] = {"kind": kind, "batch": dict(timing)}
            if name in probed and probed[name]["kind"] == kind:
                entry["latency_ms"] = {
                    "total": probed[name]["total"],
                    **(probed[name].get("parts") or {}),
                }
            if kind == "arm":
                entry["build"] = arm_build(
                    arm_infos.get(name) or {}, build_phases.get(f"index_{name}")
                )
            components[name] = entry
    for name, probed_one in probed.items():  # a learned router's choice: probed, not batched
        if name not in components:
            components[name] = {
                "kind": probed_one["kind"],
                "latency_ms": {"total": probed_one["total"], **(probed_one.get("parts") or {})},
            }
    builds = [c["build"] for c in components.values() if "build" in c]
    total = {
        "latency_ms": (probe or {}).get("end_to_end"),
        "index_bytes": _sum([b.get("index_bytes") for b in builds]),
        "disk_bytes": _sum([b.get("disk_bytes") for b in builds]),
        "build_cold_s": _sum([_sum([b.get("prepare_cold_s"), b.get("index_s")]) for b in builds]),
        **peak,
    }
    return {
        "machine": dict(machine),
        "probe": (
            {k: probe[k] for k in ("queries", "of", "method", "not_probed")}
            if probe is not None
            else {"queries": 0, "method": PROBE_OFF}
        ),
        "components": components,
        "total": total,
    }
