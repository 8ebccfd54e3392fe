"""The docs site's MkDocs hooks (mkdocs.yml `hooks:`): what makes the site unable to drift from
the code.

* `on_files`: the Reference pages are generated here, as the site builds, from the code itself
  (`reference_pages.PAGES`: the config schema, the command-line parsers, the metric registry,
  the job folder's file names, the exit codes), so there is no committed copy to go stale; and
  a page under a section's folder that `nav:` does not list is appended to that section under
  its own title (a page another change adds is reachable before anyone edits mkdocs.yml).
* `on_page_markdown`: every config key and command-line flag a page names must exist, in its
  current spelling (`names_check`); `on_post_build` fails the build with one line per problem,
  naming the page, the line, the name and the nearest known one.

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

import names_check  # noqa: E402
import nav_sections  # noqa: E402
import reference_pages  # noqa: E402
from mkdocs.exceptions import PluginError  # noqa: E402
from mkdocs.structure.files import File, Files  # noqa: E402

_problems: list[str] = []


def on_config(config: Any) -> Any:
    # The repository's src/ first, so the pages are generated from this checkout's code.
    src = str(Path(config.config_file_path).resolve().parent / "src")
    if src not in sys.path:
        sys.path.insert(0, src)
    _problems.clear()
    return config


def on_files(files: Files, config: Any) -> Files:
    for uri, render in reference_pages.PAGES.items():
        if files.get_file_from_path(uri) is not None:
            raise PluginError(f"docs/{uri} is generated as the site builds: delete the file")
        files.append(File.generated(config, uri, content=render()))
    config.nav = nav_sections.completed_nav(config.nav, files, Path(config.docs_dir))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    if page.file.src_uri not in reference_pages.PAGES:
        _problems.extend(names_check.problems(page.file.src_uri, markdown))
    return markdown


def on_post_build(config: Any) -> None:
    if _problems:
        raise PluginError(
            f"{len(_problems)} unknown or renamed name(s) in the docs:\n" + "\n".join(_problems)
        )
