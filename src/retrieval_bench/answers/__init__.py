"""The answer side: a generator's answers to a job's queries, joined to the context the job
recorded and to the labels (`python -m run.answers JOB_DIR ANSWERS`).

`score.load_job_answers` reads and scores; `write_answers` writes answers.json and answers.md
into the job folder. The answer metrics are declared in the one metric registry
(`scoring.registry`, family `answer`), as every other measure is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from retrieval_bench.answers.read import AnswerOptions
from retrieval_bench.jobdir import names

__all__ = [
    "AnswerOptions",
    "score_found_answers",
    "write_answers",
]


def write_answers(job_dir: str | Path, record: dict[str, Any]) -> list[Path]:
    """answers.json and answers.md in the job folder, each written whole (atomically); the
    job's own metrics.json is never touched."""
    from retrieval_bench.answers.report import answers_markdown
    from retrieval_bench.io.atomic import atomic_write_json, atomic_write_text
    from retrieval_bench.io.strict_json import strict_json

    job_dir = Path(job_dir)
    paths = [job_dir / names.ANSWERS_JSON, job_dir / names.ANSWERS_MD]
    atomic_write_json(paths[0], strict_json(record))
    atomic_write_text(paths[1], answers_markdown(record, str(job_dir)))
    return paths


def recorded_options(record: dict[str, Any]) -> AnswerOptions:
    """The options an answers.json was scored with (its citation pattern and judge ranges)."""
    ranges = {name: (float(lo), float(hi)) for name, (lo, hi) in record["judge_ranges"].items()}
    return AnswerOptions(record["citation_pattern"], ranges)


def score_found_answers(job_dirs: list[Path]) -> list[str]:
    """Score each job's `answers.jsonl` (a generator's answers dropped into the job folder)
    whose answers.json is missing or was scored from other content (its sha256 differs), with
    the options that answers.json recorded (else the defaults); one line per job scored. A job
    whose answers.json is current is left as it is, so `run.answers` with other options is not
    undone."""
    from retrieval_bench.answers.score import load_job_answers
    from retrieval_bench.data.jsonl import file_sha256
    from retrieval_bench.jobdir.files import read_scored_answers

    lines = []
    for job_dir in job_dirs:
        found = job_dir / names.ANSWERS_INPUT
        if not found.is_file():
            continue
        previous = read_scored_answers(job_dir)
        if previous and previous["answers"]["sha256"] == file_sha256(found):
            continue
        options = recorded_options(previous) if previous else AnswerOptions()
        write_answers(job_dir, load_job_answers(job_dir, found, options))
        lines.append(f"{job_dir}: scored {found.name} into {names.ANSWERS_JSON}")
    return lines
