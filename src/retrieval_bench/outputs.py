"""The per-job files of DESIGN.md's contracts, each written atomically."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from retrieval_bench.data.trec import write_qrels, write_run
from retrieval_bench.experiment import JobResult, manifest, stage_names
from retrieval_bench.io import atomic_write_json, atomic_write_text, jsonl_text
from retrieval_bench.reports.markdown import job_report
from retrieval_bench.reports.plots import write_plots


def write_job(job_dir: str | Path, result: JobResult, config: dict[str, Any]) -> Path:
    job_dir = Path(job_dir)
    tag = str(config.get("retriever", {}).get("name", "run"))
    if config.get("router", {}).get("name", "none") != "none":
        tag = f"router-{config['router']['name']}"
    for stage in stage_names(result.records):
        run = {
            r.query.query_id: list(zip(r.stages[stage].ids, r.stages[stage].scores, strict=True))
            for r in result.records
            if stage in r.stages and r.stages[stage].ids
        }
        write_run(job_dir / "trec" / f"{stage}.run", run, tag=tag)
    for name in result.metrics.get("baselines", {}):
        stages = {r.query.query_id: r.baselines[name] for r in result.records}
        baseline = {
            qid: list(zip(s.ids, s.scores, strict=True)) for qid, s in stages.items() if s.ids
        }
        write_run(job_dir / "trec" / "baselines" / f"{name}.run", baseline, tag=name)
    write_qrels(job_dir / "qrels.trec", result.judgements.qrels)
    atomic_write_text(job_dir / "rankings.jsonl", jsonl_text([r.to_json() for r in result.records]))
    atomic_write_json(job_dir / "metrics.json", result.metrics, indent=None)
    atomic_write_json(job_dir / "manifest.json", manifest(result, config))
    top_k = int(config.get("top_k", result.metrics["cutoffs"][0]))
    plots = write_plots(job_dir, result.metrics, top_k)
    atomic_write_text(job_dir / "report.md", job_report(result, config, plots))
    return job_dir
