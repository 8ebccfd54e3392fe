"""Command-line options several tools share."""

from __future__ import annotations

import argparse

from retrieval_bench.data.judgments import parse_grades


def add_plugin_option(parser: argparse.ArgumentParser) -> None:
    """`--plugin MODULE` (repeatable): modules imported before any measure name is read, for
    the measures they register (what a job's `scoring.plugins` does inside the app)."""
    parser.add_argument(
        "--plugin",
        dest="plugins",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE first, for the measures it registers (a job's scoring.plugins)",
    )


def grades_option(text: str) -> tuple[int, ...]:
    """`--grades 0,1,2`: an evaluation set's grade scale (argparse type)."""
    try:
        return parse_grades(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
