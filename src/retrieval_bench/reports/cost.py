"""report.md's `## Cost`: what the job's quality cost, per arm and stage, from the manifest's
`cost` record (`job.cost`): query latency one query at a time, the batch run, build time cold
and this run, index size in memory and on disk, peak memory, and the machine."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from retrieval_bench.reports.tables import markdown_table

MIB = 1024 * 1024


def mebibytes(value: Any) -> str:
    return "—" if not isinstance(value, (int, float)) else f"{value / MIB:.2f}"


def seconds(value: Any) -> str:
    return "—" if not isinstance(value, (int, float)) else f"{value:.3f}"


def ms(entry: Mapping[str, Any] | None, key: str) -> str:
    value = (entry or {}).get(key)
    return "—" if value is None else f"{value:.3f}"


def pair(entry: Mapping[str, Any] | None) -> str:
    """`p50 / p95` of a latency summary."""
    if not entry or entry.get("p50") is None:
        return "—"
    return f"{entry['p50']:.3f} / {entry['p95']:.3f}"


def machine_line(machine: Mapping[str, Any]) -> str:
    gpus = machine.get("gpus") or []
    memory = machine.get("memory_bytes")
    cores = machine.get("cpu_cores")
    usable = machine.get("cpu_cores_usable")
    cores_text = f"{cores} cores" + (
        f" ({usable} usable)" if usable is not None and usable != cores else ""
    )
    return (
        f"Machine: {machine.get('cpu_model') or 'CPU unknown'}, {cores_text}, "
        f"{'—' if memory is None else f'{memory / 1024**3:.1f} GiB'} memory, "
        f"GPU: {', '.join(gpus) if gpus else 'none'}."
    )


def latency_rows(cost: Mapping[str, Any]) -> list[list[Any]]:
    rows = []
    for name, c in cost["components"].items():
        latency = c.get("latency_ms") or {}
        batch = c.get("batch") or {}
        rows.append(
            [
                f"`{name}`",
                c["kind"],
                ms(latency.get("total"), "p50"),
                ms(latency.get("total"), "p95"),
                pair(latency.get("encode")),
                pair(latency.get("search")),
                "—" if batch.get("ms_per_query") is None else f"{batch['ms_per_query']:.3f}",
            ]
        )
    total = cost["total"].get("latency_ms")
    rows.append(["end to end", "sum", ms(total, "p50"), ms(total, "p95"), "", "", ""])
    return rows


def build_rows(cost: Mapping[str, Any]) -> list[list[Any]]:
    rows = []
    for name, c in cost["components"].items():
        b = c.get("build")
        if b is None:
            continue
        prepared = seconds(b.get("prepare_s"))
        if b.get("prepare_source"):
            prepared += f" ({b['prepare_source']})"
        rate = b.get("passages_per_s")
        rows.append(
            [
                f"`{name}`",
                b.get("prepare") or "—",
                prepared,
                seconds(b.get("prepare_cold_s")),
                "—" if rate is None else f"{rate:.1f}",
                seconds(b.get("index_s")) + (" (reused)" if b.get("index_reused") else ""),
                mebibytes(b.get("index_bytes")),
                mebibytes(b.get("disk_bytes")),
                seconds(b.get("build_s")),
                mebibytes(b.get("peak_rss_bytes")),
            ]
        )
    return rows


def cost_section(cost: Mapping[str, Any] | None) -> list[str]:
    """The section, or nothing for a job recorded without costs."""
    if not cost:
        return []
    probe = cost.get("probe") or {}
    total = cost["total"]
    probed = (
        f"{probe['queries']} of {probe.get('of', '?')} queries, {probe.get('method', '')}"
        if probe.get("queries")
        else probe.get("method", "no probe")
    )
    lines = [
        "## Cost",
        "",
        machine_line(cost.get("machine") or {}),
        "",
        f"Query latency (ms), one query at a time: {probed}. `encode` / `search`: the arm's "
        "own split (p50 / p95). `batch ms/query`: the batch run's wall time over its queries.",
    ]
    for name, why in (probe.get("not_probed") or {}).items():
        lines.append(f"`{name}`: {why}.")
    lines += [
        "",
        markdown_table(
            [
                "component",
                "kind",
                "p50",
                "p95",
                "encode p50 / p95",
                "search p50 / p95",
                "batch ms/query",
            ],
            latency_rows(cost),
        ),
        "",
        "Build and size per arm: `prepare` is what the arm does to the corpus (this run: from "
        "the cache or computed; cold: how long computing it took, now or when the cache entry "
        "was written), `index` its index build; index MiB in memory, disk MiB of its cache "
        "entry; build s and peak RSS over the arm's whole build (the process's, everything "
        "loaded before included).",
        "",
        markdown_table(
            [
                "arm",
                "prepare",
                "this run s",
                "cold s",
                "passages/s (cold)",
                "index s",
                "index MiB",
                "disk MiB",
                "build s",
                "peak RSS MiB",
            ],
            build_rows(cost),
        ),
        "",
        f"Totals: index {mebibytes(total.get('index_bytes'))} MiB in memory, "
        f"{mebibytes(total.get('disk_bytes'))} MiB on disk; cold build "
        f"{seconds(total.get('build_cold_s'))} s; peak RSS "
        f"{mebibytes(total.get('peak_rss_bytes'))} MiB (since {total.get('since', '?')}).",
        "",
    ]
    return lines
