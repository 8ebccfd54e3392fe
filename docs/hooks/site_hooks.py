"""The docs site's MkDocs hooks (mkdocs.yml `hooks:`): what makes the site unable to drift from
the code.

* `on_files`: the Reference pages are generated here, as the site builds, from the code itself
  (`reference_pages.PAGES`: the config schema, the command-line parsers, the metric registry,
  the job folder's file names, the exit codes), so there is no committed copy to go stale; and
  a page under a section's folder that `nav:` does not list is appended to that section under
  its own title (a page another change adds is reachable before anyone edits mkdocs.yml).

The modules beside this one hold the logic (tests import them from `docs/hooks/`); this file
only wires them to MkDocs' events.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

HOOKS = Path(__file__).resolve().parent
if str(HOOKS) not in sys.path:
    sys.path.insert(0, str(HOOKS))

import nav_sections  # noqa: E402
import reference_pages  # noqa: E402
from mkdocs.exceptions import PluginError  # noqa: E402
from mkdocs.structure.files import File, Files  # noqa: E402


def on_config(config: Any) -> Any:
    # The repository's src/ first, so the pages are generated from this checkout's code.
    src = str(Path(config.config_file_path).resolve().parent / "src")
    if src not in sys.path:
        sys.path.insert(0, src)
    return config


def on_files(files: Files, config: Any) -> Files:
    for uri, render in reference_pages.PAGES.items():
        if files.get_file_from_path(uri) is not None:
            raise PluginError(f"docs/{uri} is generated as the site builds: delete the file")
        files.append(File.generated(config, uri, content=render()))
    config.nav = nav_sections.completed_nav(config.nav, files, Path(config.docs_dir))
    return files
