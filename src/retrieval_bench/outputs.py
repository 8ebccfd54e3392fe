"""The per-job files of DESIGN.md's contracts, each written atomically."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from retrieval_bench.data.trec import write_qrels, write_run
from retrieval_bench.experiment import JobResult, manifest, stage_names
from retrieval_bench.io import atomic_write_json, atomic_write_text, jsonl_text
from retrieval_bench.reports.markdown import job_report


def write_job(job_dir: str | Path, result: JobResult, config: dict[str, Any]) -> Path:
    job_dir = Path(job_dir)
    tag = str(config.get("retriever", {}).get("name", "run"))
    for stage in stage_names(result.records):
        run = {
            r.query.query_id: list(zip(r.stages[stage].ids, r.stages[stage].scores, strict=True))
            for r in result.records
            if stage in r.stages and r.stages[stage].ids
        }
        write_run(job_dir / "trec" / f"{stage}.run", run, tag=tag)
    write_qrels(job_dir / "qrels.trec", result.judgements.qrels)
    atomic_write_text(job_dir / "rankings.jsonl", jsonl_text([r.to_json() for r in result.records]))
    atomic_write_json(job_dir / "metrics.json", result.metrics)
    atomic_write_json(job_dir / "manifest.json", manifest(result, config))
    atomic_write_text(job_dir / "report.md", job_report(result, config))
    return job_dir
