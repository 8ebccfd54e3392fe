"""The Reference pages, each generated from the code as the site builds: `PAGES` maps a page's
path under docs/ to the function that writes its Markdown."""

from __future__ import annotations

from collections.abc import Callable

import reference_cli
import reference_config
import reference_exits
import reference_files
import reference_metrics

PAGES: dict[str, Callable[[], str]] = {
    "reference/config.md": reference_config.page,
    "reference/cli.md": reference_cli.page,
    "reference/metrics.md": reference_metrics.page,
    "reference/files.md": reference_files.page,
    "reference/exit-codes.md": reference_exits.page,
}
