"""The answer side: a generator's answers to a job's queries, joined to the context the job
recorded and to the labels (`python -m run.answers JOB_DIR ANSWERS`).

`score.load_job_answers` reads and scores; `write_answers` writes answers.json and answers.md
into the job folder. The metric names `run.compare` and the gate accept are declared in
`names.ANSWER_METRICS`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from retrieval_bench.answers.names import ANSWER_METRICS, JUDGE_PREFIX, is_answer_metric
from retrieval_bench.answers.read import AnswerOptions

__all__ = ["ANSWER_METRICS", "JUDGE_PREFIX", "AnswerOptions", "is_answer_metric", "write_answers"]


def write_answers(job_dir: str | Path, record: dict[str, Any]) -> list[Path]:
    """answers.json and answers.md in the job folder, each written whole (atomically); the
    job's own metrics.json is never touched."""
    from retrieval_bench.answers.report import answers_markdown
    from retrieval_bench.answers.score import ANSWERS_JSON, ANSWERS_MD
    from retrieval_bench.compare.build import strict_json
    from retrieval_bench.io import atomic_write_json, atomic_write_text

    job_dir = Path(job_dir)
    paths = [job_dir / ANSWERS_JSON, job_dir / ANSWERS_MD]
    atomic_write_json(paths[0], strict_json(record))
    atomic_write_text(paths[1], answers_markdown(record, str(job_dir)))
    return paths
