"""Cost beside quality in every job: per-query latency (the probe), the batch run, build time
cold and cached, index and cache sizes, memory and the machine, in manifest.json and report.md.
Nothing here asserts a duration: only that each figure is measured, where it comes from, and
that sizes equal the bytes they describe."""

from __future__ import annotations

import json
import os
from pathlib import Path

import faiss
import numpy as np
import pytest
from conftest import mini_overrides, run_in_process

from retrieval_bench.job.latency import probe_positions, summary
from retrieval_bench.job.machine import MemoryMeter, machine
from retrieval_bench.job.timing import PluginTiming


@pytest.fixture(scope="module")
def hybrid_twice(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict, Path]:
    """The mini hybrid job on a fresh cache (cold), then again on the same cache (cached)."""
    tmp = tmp_path_factory.mktemp("cost")
    overrides = [*mini_overrides(tmp), "retriever=hybrid", "cost.latency_queries=4"]
    _, first = run_in_process(overrides, tmp / "first")
    _, second = run_in_process(overrides, tmp / "second")
    manifests = [json.loads((d / "manifest.json").read_text()) for d in (first, second)]
    return manifests[0]["cost"], manifests[1]["cost"], second


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_every_arm_and_stage_has_its_latency_and_batch_time(hybrid_twice) -> None:
    cold, _, _ = hybrid_twice
    components = cold["components"]
    assert {n: c["kind"] for n, c in components.items()} == {
        "bm25": "arm",
        "dense": "arm",
        "rrf": "combiner",
        "final": "stage",
    }
    # 4 of the mini set's 9 queries, one at a time; the arms split encode from search.
    assert cold["probe"]["queries"] == 4 and cold["probe"]["of"] == 9
    for name in ("bm25", "dense"):
        latency = components[name]["latency_ms"]
        assert {latency[p]["n"] for p in ("total", "encode", "search")} == {4}
        assert latency["total"]["p50"] <= latency["total"]["p95"] <= latency["total"]["max"]
        assert components[name]["batch"]["queries"] == 9
    assert "encode" not in components["final"]["latency_ms"]
    assert cold["total"]["latency_ms"]["n"] == 4
    # The end to end of a query is the sum of its components: so is its mean.
    means = sum(c["latency_ms"]["total"]["mean"] for c in components.values())
    assert cold["total"]["latency_ms"]["mean"] == pytest.approx(means, abs=1e-3)


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_build_is_cold_then_cached_and_the_cache_keeps_the_cold_time(hybrid_twice) -> None:
    cold, cached, _ = hybrid_twice
    for name in ("bm25", "dense"):
        first, second = cold["components"][name]["build"], cached["components"][name]["build"]
        assert first["prepare_source"] == "computed"
        assert second["prepare_source"] == "cache"
        # The cold time the second job states is the one the first measured (cache record).
        assert second["prepare_cold_s"] == pytest.approx(first["prepare_cold_s"], abs=1e-3)
        assert first["passages_per_s"] == pytest.approx(12 / first["prepare_cold_s"], rel=1e-2)
        assert first["peak_rss_bytes"] > 0


def test_sizes_are_the_bytes_they_describe(hybrid_twice, tmp_path: Path) -> None:
    _, cached, job = hybrid_twice
    cache = Path(json.loads((job / "manifest.json").read_text())["config"]["cache_dir"])
    dense = cached["components"]["dense"]["build"]
    entry = sorted((cache / "embeddings").rglob("*.npy"), key=os.path.getmtime)
    passages = next(
        p for p in entry if json.loads(p.with_suffix(".json").read_text())["role"] == "passages"
    )
    assert (
        dense["disk_bytes"]
        == passages.stat().st_size + passages.with_suffix(".json").stat().st_size
    )
    vectors = np.load(passages)
    flat = faiss.IndexFlatIP(vectors.shape[1])
    flat.add(vectors)
    assert dense["index_bytes"] == faiss.serialize_index(flat).nbytes
    [tokens] = list((cache / "tokens").rglob("*.npz"))
    assert cached["components"]["bm25"]["build"]["disk_bytes"] == tokens.stat().st_size
    total = cached["total"]
    assert (
        total["index_bytes"]
        == dense["index_bytes"] + cached["components"]["bm25"]["build"]["index_bytes"]
    )


def test_the_machine_is_recorded(hybrid_twice) -> None:
    cold, _, _ = hybrid_twice
    assert cold["machine"]["cpu_cores"] == os.cpu_count()
    assert cold["machine"] == {**machine(), "hostname": cold["machine"]["hostname"]}


def test_report_md_has_the_cost_tables(hybrid_twice) -> None:
    _, _, job = hybrid_twice
    report = (job / "report.md").read_text(encoding="utf-8")
    section = report[report.index("## Cost") : report.index("## Timings")]
    assert "Machine: " in section and "4 of 9 queries" in section
    for row in (
        "| `bm25` | arm |",
        "| `dense` | arm |",
        "| `rrf` | combiner |",
        "| `final` | stage |",
        "| end to end | sum |",
        "| `dense` | encode passages |",
        "| `bm25` | tokenise passages |",
    ):
        assert row in section, row
    assert "(cache)" in section


def test_probe_positions_spread_over_the_set() -> None:
    assert probe_positions(10, 4) == [0, 3, 6, 9]
    assert probe_positions(3, 50) == [0, 1, 2]
    assert probe_positions(5, 0) == []


def test_latency_summary_is_numpys_percentiles() -> None:
    """Linear interpolation: p95 of 5 values sits at position 0.95 * 4 = 3.8, between 4 and
    100: 4 + 0.8 * 96 = 80.8."""
    values = [1.0, 2.0, 3.0, 4.0, 100.0]
    assert summary(values) == {
        "n": 5,
        "p50": 3.0,
        "p95": 80.8,
        "max": 100.0,
        "mean": 22.0,
    }
    assert summary([])["p95"] is None


def test_plugin_timing_counts_calls_and_queries() -> None:
    timing = PluginTiming()
    import time

    for queries in (3, 5):
        timing.add("arms", "bm25", queries, time.perf_counter())
    entry = timing.to_json()["arms"]["bm25"]
    assert (entry["calls"], entry["queries"]) == (2, 8)
    assert entry["ms_per_query"] == pytest.approx(1000 * entry["seconds"] / 8, abs=1e-3)


def test_memory_meter_sees_an_allocation() -> None:
    meter = MemoryMeter()
    with meter.phase("allocate"):
        block = np.ones(64 * 1024 * 1024 // 8)  # 64 MiB, touched
        del block
    phase = meter.phases["allocate"]
    if meter.resettable:
        assert phase["peak_rss_bytes"] >= 64 * 1024 * 1024
    assert meter.job_peak()["peak_rss_bytes"] >= 64 * 1024 * 1024


def test_gpus_are_read_from_the_nvidia_drivers_proc_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The driver's /proc/driver/nvidia/gpus/<bus id>/information files, as it writes them."""
    from retrieval_bench.job import machine as machine_module

    for bus, model in (("0000:17:00.0", "NVIDIA H200"), ("0000:65:00.0", "NVIDIA H200")):
        (tmp_path / bus).mkdir()
        (tmp_path / bus / "information").write_text(
            f"Model: \t\t {model}\nIRQ:   \t\t 160\nGPU UUID: \t GPU-0\n", encoding="utf-8"
        )
    monkeypatch.setattr(machine_module, "_NVIDIA_PROC", tmp_path)
    assert machine_module.gpus() == ["NVIDIA H200", "NVIDIA H200"]
    monkeypatch.setattr(machine_module, "_NVIDIA_PROC", tmp_path / "absent")
    monkeypatch.setattr(machine_module.shutil, "which", lambda name: None)
    assert machine_module.gpus() == []
