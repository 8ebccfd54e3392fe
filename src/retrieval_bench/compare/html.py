"""comparison.html: a sweep's explorer, built from its finished job folders.

Each job's rankings.jsonl, qrels.trec, metrics.json and plots are read back from its folder;
the passage texts from the corpus its config names (when it is still readable from here; else
the page says the texts are not at hand). Job folders the comparison skipped (unfinished, not
written by this sweep) are named in the page with the reason.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from retrieval_bench.data.trec import read_qrels
from retrieval_bench.errors import BenchError
from retrieval_bench.jobdir.read import FinishedJob
from retrieval_bench.records import passage_text
from retrieval_bench.reports.explorer_data import (
    SystemRun,
    TextOf,
    explorer_payload,
    read_plots,
    read_rankings,
)
from retrieval_bench.reports.html import SWEEP_HTML, write_html

log = logging.getLogger(__name__)


def corpus_texts(job: FinishedJob) -> TextOf:
    """passage id -> the text every component saw (title, newline, text), from the corpus the
    job's config names; a lookup that knows nothing when that corpus cannot be read."""
    from retrieval_bench.data.loader import load_dataset
    from retrieval_bench.paths import resolve_path

    ds = job.config.get("dataset") or {}
    try:
        dataset = load_dataset(
            str(ds.get("format", "native")),
            str(ds.get("name", job.dataset)),
            resolve_path(str(ds.get("corpus", ""))),
            resolve_path(str(ds.get("evalset", ""))),
            resolve_path(str(ds["path"])) if ds.get("path") else Path(),
            str(ds.get("split", "test")),
        )
    except (OSError, BenchError, ValueError, KeyError) as exc:
        log.warning("comparison.html without passage texts: dataset unreadable (%s)", exc)
        return lambda pid: None
    by_id = {p.id: p for p in dataset.passages}
    return lambda pid: passage_text(by_id[pid]) if pid in by_id else None


def system_run(job: FinishedJob) -> SystemRun:
    return SystemRun(
        label=job.label,
        path=str(job.path),
        top_k=job.top_k,
        metrics=job.metrics,
        rankings=read_rankings(job.path / "rankings.jsonl"),
        plots=read_plots(job.path),
    )


def write_comparison_html(
    out_dir: Path,
    datasets: Mapping[str, Any],
    jobs: Mapping[str, Sequence[FinishedJob]],
    settings: Mapping[str, Any],
    skipped: Sequence[tuple[Path, str]],
) -> list[Path]:
    """`comparison.html` (one dataset) or `comparison-<dataset>.html` each; returns them."""
    written = []
    for name, record in datasets.items():
        group = jobs[name]
        qrels: dict[str, dict[str, int]] = {}
        for job in group:
            try:
                for qid, labels in read_qrels(job.path / "qrels.trec").items():
                    qrels.setdefault(qid, labels)
            except FileNotFoundError:
                continue
        payload = explorer_payload(
            f"Comparison: {name} ({len(group)} jobs, stage {record['stage']})",
            "sweep",
            [system_run(job) for job in group],
            qrels,
            corpus_texts(group[0]),
            comparison=record,
            settings=settings,
            left_out=[(str(path), reason) for path, reason in skipped],
        )
        # A group's title may hold spaces and "=" (`travel (unit=doc)`): not in a file name.
        slug = re.sub(r"[^\w.-]+", "-", name).strip("-")
        file = SWEEP_HTML if len(datasets) == 1 else f"comparison-{slug}.html"
        written.append(write_html(out_dir / file, payload, f"sweep folder {out_dir}"))
    return written
