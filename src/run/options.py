"""Command-line options several tools share."""

from __future__ import annotations

import argparse


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
