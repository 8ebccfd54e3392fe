"""report.md's line per service arm: how fast the service answered and what could not be used
(from the arm's manifest record, `ServiceArm.info()`; this module reads plain data only)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def service_lines(arms: Mapping[str, Mapping[str, Any] | None]) -> list[str]:
    """A section with one paragraph per arm whose record is a service's (`kind: service`);
    nothing when the job has none."""
    lines: list[str] = []
    for name, info in arms.items():
        if not info or info.get("kind") != "service":
            continue
        latency = info.get("latency_ms") or {}
        timing = (
            f"latency ms p50 {latency['p50']:.1f}, p95 {latency['p95']:.1f}, "
            f"max {latency['max']:.1f}"
            if latency
            else "no latency recorded"
        )
        failures = ", ".join(f"{kind} {n}" for kind, n in info["failures"].items())
        lines += [
            f"Service arm `{name}` ({info['url']}): {info['queries']} queries, {timing}; "
            f"retried {info['retried_queries']}"
            + (f"; failures: {failures}" if failures else "")
            + f"; answers re-sorted by score {info['reordered_queries']}. What its answers "
            "held that could not be used is under *Arm input*. The job's filters are not "
            "applied to a service (its leaks are what leak@K measures); every query's latency: "
            "`manifest.json`.",
            "",
        ]
    return ["## Service arms", "", *lines] if lines else []
