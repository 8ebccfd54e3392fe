"""The monthly job's judge step (`benchmark.judge`): before the month is compared and gated,
each dataset's jobs are pooled, the pool's pairs graded by the model judge, and the month
measured against people's labels plus the judge's.

Per dataset folder of the month, under `<month>/<dataset>/judge/`: `pool.jsonl` (the jobs' top
`depth` passages that people left unlabelled, against the dataset's evaluation set as it is),
`judgments.jsonl` (`run.judge`'s file: the judge cache answers every pair graded in an earlier
month, so only new pool entries cost a call), and the label snapshot, a copy of the evaluation
set with the judge's labels (`<name>.<hash>.jsonl`; the evaluation set itself is never
written). Each job is re-scored against the snapshot (`metrics.rescored.json`; its own
metrics.json stays what it measured against people's labels), and the month is compared with
the three estimates (`judge.estimates`) and gated on the re-scored metrics; the gate re-scores
the baseline against the same labels and says which checks rest on the judge's labels.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TypeVar

from retrieval_bench.config import RunConfig
from retrieval_bench.config.benchmark import BenchmarkJudgeConfig
from retrieval_bench.data.judgments import corpus_ids, import_judgements
from retrieval_bench.io.atomic import atomic_write_bytes, atomic_write_text
from retrieval_bench.io.strict_json import jsonl_text
from retrieval_bench.jobdir import names
from retrieval_bench.jobdir.read import FinishedJob
from retrieval_bench.judge.base import Judge, config_key
from retrieval_bench.judge.build import build_judge
from retrieval_bench.judge.cache import JudgeCache
from retrieval_bench.judge.files import JUDGMENTS, MONTH_JUDGE_DIR
from retrieval_bench.judge.judging import judge_pool
from retrieval_bench.labels.pool import pool_folders
from retrieval_bench.labels.rescore import as_rescored, rescore_job, write_rescored
from retrieval_bench.paths import resolve_output, resolve_path

K = TypeVar("K")
KEY = config_key("benchmark.judge")


def month_judge(settings: BenchmarkJudgeConfig) -> Judge:
    """The judge `benchmark.judge` describes (a bad setting exits 2 naming its key); built
    before any job runs."""
    return build_judge(
        settings, tuple(settings.grades), need_thresholds=True, key=KEY
    )


def judge_month(
    cfg: RunConfig, jobs: Mapping[K, FinishedJob]
) -> tuple[dict[K, FinishedJob], dict[Path, Path], list[str]]:
    """The month's jobs re-scored against people's plus the judge's labels, each dataset
    folder's label snapshot, and one line per dataset saying what was judged."""
    settings = cfg.benchmark.judge
    judge = month_judge(settings)
    scale = tuple(settings.grades)
    cache = JudgeCache(resolve_output(cfg.cache_dir), "cache_dir")
    out = dict(jobs)
    snapshots: dict[Path, Path] = {}
    lines: list[str] = []
    folders: dict[Path, list[K]] = {}
    for key, job in jobs.items():
        folders.setdefault(job.path.parent, []).append(key)
    for folder, keys in sorted(folders.items()):
        depth = settings.depth or max(jobs[k].top_k for k in keys)
        pool = pool_folders(folder, depth)
        work = folder / MONTH_JUDGE_DIR
        atomic_write_text(work / names.POOL_JSONL, jsonl_text(pool.records))
        _, tally = judge_pool(work / names.POOL_JSONL, judge, cache, work / JUDGMENTS)
        # A copy of the labels beside the judgments: the snapshot is written next to it.
        base = work / pool.evalset.name
        atomic_write_bytes(base, pool.evalset.read_bytes())
        corpus = str((jobs[keys[0]].config.get("dataset") or {}).get("corpus"))
        passages = corpus_ids(resolve_path(corpus))
        result = import_judgements(work / JUDGMENTS, base, passages, scale)
        snapshot = result.snapshot or base
        for key in keys:
            rescored = rescore_job(jobs[key].path, evalset=snapshot)
            write_rescored(rescored)
            out[key] = as_rescored(jobs[key], rescored)
        snapshots[folder] = snapshot
        lines.append(
            f"judge {folder.name}: pool of {len(pool.records)} pairs at depth {depth}; "
            + "; ".join(tally.lines()).replace("\n", " ")
            + f"; labels {snapshot}"
        )
    return out, snapshots, lines
