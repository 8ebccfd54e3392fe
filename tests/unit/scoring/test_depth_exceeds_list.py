"""A cut-off deeper than a stage's lists is flagged in metrics.json and report.md, not measured
as if the list went on."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import FIXTURE, compose_config, config_record

from retrieval_bench.job.runner import run_job
from retrieval_bench.reports.markdown import job_report


def test_cutoff_deeper_than_the_list_is_flagged(tmp_path: Path, shared_cache: Path) -> None:
    overrides = [
        "dataset.name=mini",
        f"dataset.corpus={FIXTURE / 'corpus' / 'mini'}",
        f"dataset.evalset={FIXTURE / 'evalsets' / 'mini.jsonl'}",
        f"cache_dir={shared_cache}",
        "retriever=bm25",
        "top_k=6",
        "scoring.cutoffs=[10]",
    ]
    cfg = compose_config(overrides)
    result = run_job(cfg)
    stages = result.metrics["stages"]
    # final holds top_k = 6: @10 is not measured at 10. bm25's pool holds 10: nothing to flag.
    assert stages["final"]["depth_exceeds_list"] == {"list_length": 6, "cutoffs": [10]}
    assert "depth_exceeds_list" not in stages["bm25"]
    json.dumps(stages["final"]["depth_exceeds_list"])
    report = job_report(result, config_record(cfg))
    final = report[report.index("## Stage `final`") :]
    assert "@10 ‡ deeper than this stage's lists (6): not measured" in final
    assert "@6\n" in final
    bm25 = report[report.index("## Stage `bm25`") : report.index("## Stage `final`")]
    assert "‡" not in bm25
