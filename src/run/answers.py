"""`python -m run.answers JOB_DIR ANSWERS [--citation-pattern REGEX] [--judge NAME=LOW:HIGH]`.

Scores a generator's answers (answers.jsonl) against a finished job's recorded context and the
labels, per query type, and writes answers.json and answers.md into the job folder (where
`run.compare` and the monthly gate read the answer metrics). The work is done by
`retrieval_bench.answers`. Exit 2 on an unusable answers file, naming its line.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from retrieval_bench.answers import AnswerOptions, write_answers
from retrieval_bench.answers.read import DEFAULT_CITATION_PATTERN, DEFAULT_JUDGE_RANGES
from retrieval_bench.errors import ConfigError
from run.exits import guarded


def judge_range(text: str) -> tuple[str, tuple[float, float]]:
    """`faithfulness=0:1` -> ("faithfulness", (0.0, 1.0))."""
    name, sep, bounds = text.partition("=")
    low, colon, high = bounds.partition(":")
    try:
        if not (sep and colon and name.strip()):
            raise ValueError
        return name.strip(), (float(low), float(high))
    except ValueError:
        raise ConfigError(
            "--judge", f"{text!r}: expected NAME=LOW:HIGH, e.g. faithfulness=0:1"
        ) from None


def main(argv: Sequence[str] | None = None) -> int:
    """The command, with the exit codes of run.exits for whatever escapes it."""
    return guarded(lambda: _main(argv))


def _main(argv: Sequence[str] | None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m run.answers",
        description="Score a generator's answers against a finished job's context and labels.",
    )
    parser.add_argument("job_dir", type=Path, help="a finished job folder")
    parser.add_argument("answers", type=Path, help="answers.jsonl: one answer per query")
    parser.add_argument(
        "--citation-pattern",
        default=DEFAULT_CITATION_PATTERN,
        help="regular expression finding citations in an answer's text when the line has no "
        "`citations` list (default: [..] and 【..】)",
    )
    parser.add_argument(
        "--judge",
        action="append",
        default=[],
        metavar="NAME=LOW:HIGH",
        help="declare a judge score and its range (repeatable); faithfulness, answer_relevancy, "
        "answer_correctness, context_precision, context_recall are declared as 0:1",
    )
    args = parser.parse_args(argv)
    from retrieval_bench.answers.report import answers_text
    from retrieval_bench.answers.score import load_job_answers
    from retrieval_bench.jobdir.read import JobFolderError, is_finished

    if not is_finished(args.job_dir):
        raise JobFolderError(f"{args.job_dir}: not a finished job folder")
    ranges = {**DEFAULT_JUDGE_RANGES, **dict(judge_range(text) for text in args.judge)}
    options = AnswerOptions(args.citation_pattern, ranges)
    record = load_job_answers(args.job_dir, args.answers, options)
    written = write_answers(args.job_dir, record)
    print(answers_text(record), flush=True)
    print(f"wrote {', '.join(str(p) for p in written)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
