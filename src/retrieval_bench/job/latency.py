"""Per-query latency, measured as a served system sees it: one query at a time.

The batch run ranks every query of an arm in one call (a dense arm encodes them in one batch,
a reranker scores every pair in one batch), so its wall time says what the batch cost, not
what one query waits. After the batch run, the probe sends `cost.latency_queries` queries
(spread evenly over the evaluation set, in its order) one at a time through what the job ran
for each: every arm of the query's strategy (with the query's own filter mask, at
`retriever.pool_size`), its combiner when it fuses several arms, then each later stage in
order, fed the ranking the batch run recorded before it. Each call is timed with
`time.perf_counter`; an arm that knows its parts (`time_query`: BM25 tokenising vs scoring,
dense encoding, past the embedding cache, vs FAISS search) reports them split. The first
query runs once untimed first (a warm-up). The end-to-end latency of a query is the sum over
its components, as a sequential pipeline serves it (arms run one after another; running them
in parallel would lower it).

Caveats, said in the manifest: the probe runs warm (models loaded, indexes built, caches hot)
in the job's process; an arm that says `latency_probe = False` (a remote service, which a probe
would send more requests) is not called again: the latency its batch run recorded for that
query (`info()["latency_ms_by_query"]`) stands in. Percentiles are numpy's (linear
interpolation) over the probed queries.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from retrieval_bench.job.pipeline import Pipeline
from retrieval_bench.plugins import guarded_call
from retrieval_bench.protocols import Arm
from retrieval_bench.records import EvalQuery, QueryRecord, Ranked, StageRecord
from retrieval_bench.routing.rules import Strategy

METHOD = (
    "queries spread evenly over the evaluation set, each sent alone through its strategy's "
    "arms, combiner and later stages after the batch run (warm, after one untimed query), "
    "timed with perf_counter; "
    "end to end = the sum of its components; p50/p95: numpy percentiles (linear)"
)


def probe_positions(total: int, wanted: int) -> list[int]:
    """`wanted` positions out of `total`, evenly spread, first and last included."""
    if wanted <= 0 or total <= 0:
        return []
    if wanted >= total:
        return list(range(total))
    return sorted(set(np.rint(np.linspace(0, total - 1, wanted)).astype(int).tolist()))


def summary(values: Sequence[float]) -> dict[str, Any]:
    """p50, p95, max and mean (ms, 4 decimals) and how many values."""
    if not values:
        return {"n": 0, "p50": None, "p95": None, "max": None, "mean": None}
    array = np.asarray(values, dtype=np.float64)
    return {
        "n": int(array.size),
        "p50": round(float(np.percentile(array, 50)), 4),
        "p95": round(float(np.percentile(array, 95)), 4),
        "max": round(float(array.max()), 4),
        "mean": round(float(array.mean()), 4),
    }


def ranked_of(stage: StageRecord) -> Ranked:
    """A recorded stage back as the Ranked the pipeline passed on."""
    indices = stage.indices if stage.indices is not None else np.empty(0, dtype=np.int64)
    return Ranked(
        np.asarray(indices, dtype=np.int64),
        np.asarray(stage.scores, dtype=np.float64),
        stage.pool_requested,
        stage.empty_reason,
    )


def _ms_since(start: float) -> float:
    return 1000 * (time.perf_counter() - start)


class _Samples:
    """Per component: its kind and each part's milliseconds per probed query."""

    def __init__(self) -> None:
        self.kinds: dict[str, str] = {}
        self.parts: dict[str, dict[str, list[float]]] = {}
        self.totals: dict[str, list[float]] = {}

    def add(self, name: str, kind: str, parts: Mapping[str, float]) -> float:
        self.kinds[name] = kind
        for part, ms in parts.items():
            self.parts.setdefault(name, {}).setdefault(part.removesuffix("_ms"), []).append(ms)
        total = float(sum(parts.values()))
        self.totals.setdefault(name, []).append(total)
        return total

    def to_json(self) -> dict[str, Any]:
        out = {}
        for name, kind in self.kinds.items():
            parts = self.parts.get(name, {})
            entry: dict[str, Any] = {"kind": kind, "total": summary(self.totals[name])}
            if set(parts) - {"search", "apply", "combine"}:  # split: encode and search
                entry["parts"] = {part: summary(values) for part, values in parts.items()}
            out[name] = entry
        return out


def _time_arm(
    name: str, arm: Arm, query: EvalQuery, k: int, mask: np.ndarray | None
) -> dict[str, float]:
    what = f"arm '{name}'"
    timed = getattr(arm, "time_query", None)
    parts = guarded_call(what, arm, timed, query, k, mask) if timed is not None else None
    if parts is not None:
        return dict(parts)
    start = time.perf_counter()
    guarded_call(what, arm, arm.search, [query], k, [mask])
    return {"search_ms": _ms_since(start)}


def _probe_one(
    pipeline: Pipeline,
    record: QueryRecord,
    strategy: Strategy,
    infos: Mapping[str, Mapping[str, Any]],
    samples: _Samples,
    not_probed: dict[str, str],
    router: Callable[[QueryRecord], Mapping[str, float]] | None = None,
) -> float | None:
    """One query through its arms, combiner and stages, each timed into `samples`; its end to
    end milliseconds (None when an unprobed arm recorded no latency for it). With a `router`
    chosen after the search (a learned router), every arm ranks the query and the router's
    own work is a component."""
    query, mask = record.query, record.filter.mask
    total, complete = 0.0, True
    for name in list(pipeline.arms) if router is not None else strategy.arms:
        arm = pipeline.arms[name]
        if getattr(arm, "latency_probe", True):
            timed = _time_arm(name, arm, query, pipeline.pool_size, mask)
            total += samples.add(name, "arm", timed)
            continue
        recorded = (infos.get(name) or {}).get("latency_ms_by_query") or {}
        not_probed[name] = "not called again: the batch run's own latency per query"
        if query.query_id in recorded:
            total += samples.add(name, "arm", {"search_ms": float(recorded[query.query_id])})
        else:
            complete = False
    if router is not None:
        total += samples.add("router", "router", router(record))
    if len(strategy.arms) > 1:
        pools = [ranked_of(record.stages[name]) for name in strategy.arms]
        combiner = pipeline.combiners[strategy.combine]
        start = time.perf_counter()
        what = f"combiner '{strategy.combine}'"
        guarded_call(what, combiner, combiner.combine, pools, pipeline.tie_break)
        total += samples.add(strategy.combine, "combiner", {"combine_ms": _ms_since(start)})
    given = ranked_of(record.stages["fused" if len(strategy.arms) > 1 else strategy.arms[0]])
    for name, stage in pipeline.stages:
        start = time.perf_counter()
        guarded_call(f"stage '{name}'", stage, stage.apply, [query], [given])
        total += samples.add(name, "stage", {"apply_ms": _ms_since(start)})
        given = ranked_of(record.stages[name])
    return total if complete else None


def probe_latency(
    pipeline: Pipeline,
    records: Sequence[QueryRecord],
    strategies: Mapping[str, Strategy],
    count: int,
    infos: Mapping[str, Mapping[str, Any]],
    router: Callable[[QueryRecord], Mapping[str, float]] | None = None,
) -> dict[str, Any]:
    """The probe of the module docstring over `count` of `records` (the batch run's, with
    their filter masks); `strategies` by name (the strategy each record names); `infos`: each
    arm's `info()` taken after the batch run, for the latency an unprobed arm recorded. The
    first probed query runs once untimed first: a model loaded lazily (an encoder whose
    vectors all came from the cache) loads there, not inside a timed query. `router`: a
    router that chooses after the search (`_probe_one`), timed per query."""
    samples = _Samples()
    end_to_end: list[float] = []
    not_probed: dict[str, str] = {}
    positions = probe_positions(len(records), count)
    for i in positions[:1]:
        record = records[i]
        _probe_one(pipeline, record, strategies[record.strategy], infos, _Samples(), {}, router)
    for i in positions:
        record = records[i]
        total = _probe_one(
            pipeline, record, strategies[record.strategy], infos, samples, not_probed, router
        )
        if total is not None:
            end_to_end.append(total)
    return {
        "queries": len(positions),
        "of": len(records),
        "method": METHOD,
        "components": samples.to_json(),
        "end_to_end": summary(end_to_end),
        "not_probed": not_probed,
    }
