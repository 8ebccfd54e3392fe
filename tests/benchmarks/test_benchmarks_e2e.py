"""The end-to-end benchmark runs the app's whole job at a tiny size and reports every phase.

Timings are never asserted (they flake on shared machines): only that each RESULT line parses,
that every phase of each job is reported, and that each job folder holds its metrics with every
query scored.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import run_benchmark

RESULT = re.compile(r"^RESULT e2e (?:(growth|target) )?((?:[\w@]+=\S+ ?)+)$")
SIZES = (1000, 2000)
QUERIES = 50  # what --quick asks for


def parse_results(out: str) -> list[tuple[str, dict[str, str]]]:
    """(kind, fields) of every `RESULT e2e` line; a malformed one fails the test."""
    rows = []
    for line in out.splitlines():
        if not line.startswith("RESULT e2e"):
            continue
        match = RESULT.match(line)
        assert match, f"unparseable RESULT line: {line!r}"
        fields = dict(part.split("=", 1) for part in match.group(2).split())
        rows.append((match.group(1) or "phase", fields))
    return rows


def _has_precomputed() -> bool:
    from retrieval_bench.config import encoder

    return hasattr(encoder, "PRECOMPUTED")


@pytest.mark.slow
def test_e2e_benchmark_quick(tmp_path: Path) -> None:
    sizes = ",".join(map(str, SIZES))
    args = ("--quick", "--sizes", sizes, "--workdir", str(tmp_path))
    out = run_benchmark("bench_e2e.py", *args, timeout=600)
    rows = parse_results(out)
    phases = {
        "bm25": {"load", "tokenise", "index", "retrieve", "score", "write", "other", "total"},
        "dense": {"load", "index", "retrieve", "other", "total"},
    }
    if _has_precomputed():  # the dense job is the app's own job
        phases["dense"] |= {"score", "write"}
    for job, expected in phases.items():
        for n in SIZES:
            mine = [f for kind, f in rows if kind == "phase" and f["job"] == job]
            mine = [f for f in mine if f["passages"] == str(n)]
            assert {f["phase"] for f in mine} == expected, (job, n)
            for f in mine:
                assert f["queries"] == str(QUERIES)
                assert float(f["wall_s"]) >= 0 and float(f["peak_rss_mib"]) > 0
        growth = [f for kind, f in rows if kind == "growth" and f["job"] == job]
        assert {f["phase"] for f in growth} == expected, job
        assert all((f["from"], f["to"]) == tuple(map(str, SIZES)) for f in growth)
        (target,) = [f for kind, f in rows if kind == "target" and f["job"] == job]
        assert target["passages"] == str(SIZES[-1]) and target["met"] in {"yes", "no"}
    jobs = tmp_path / "retrieval-bench-e2e" / "jobs"
    for n in SIZES:
        app_jobs = ["bm25", "dense"] if _has_precomputed() else ["bm25"]
        for job in app_jobs:
            metrics = json.loads((jobs / f"synth{n}-{job}" / "job" / "metrics.json").read_text())
            assert metrics["stages"]["final"]["counts"]["scored"] == QUERIES
        totals = [f for kind, f in rows if kind == "phase" and f["phase"] == "total"]
        assert {f["scored"] for f in totals if f["job"] in app_jobs} == {str(QUERIES)}
    evalset = tmp_path / "retrieval-bench-e2e" / "evalsets" / f"synth{SIZES[-1]}.jsonl"
    assert len(evalset.read_text(encoding="utf-8").splitlines()) == QUERIES
