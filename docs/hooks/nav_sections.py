"""The site's `nav:` completed with the pages it does not list: a page in a section's folder
(`how-to/x.md`) is appended to the section whose listed pages live in that folder, under the
page's own title (its first `# ` heading), in file-name order. A page in no section's folder
is appended at the top level. So a page another change adds is in the site at once, and
`--strict` (which fails on a page left out of the nav) stays green until someone places it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import Files

NavItem = Any  # str | dict[str, str | list[NavItem]], as mkdocs.yml writes it


def listed(nav: list[NavItem]) -> set[str]:
    """Every page path the nav lists."""
    out: set[str] = set()
    for item in nav:
        value = item if isinstance(item, str) else next(iter(item.values()))
        if isinstance(value, list):
            out |= listed(value)
        elif not re.match(r"^[a-z]+://", value):
            out.add(value)
    return out


def title_of(markdown: str, uri: str) -> str:
    heading = re.search(r"^# (.+)$", markdown, re.MULTILINE)
    return heading.group(1).strip() if heading else Path(uri).stem.replace("-", " ").capitalize()


def _folder_of_section(children: list[NavItem]) -> str | None:
    """The folder the section's pages live in, when they share one."""
    folders = {str(Path(p).parent) for p in listed(children)}
    return folders.pop() if len(folders) == 1 else None


def completed_nav(nav: list[NavItem] | None, files: Files, docs_dir: Path) -> list[NavItem]:
    nav = list(nav or [])
    known = listed(nav)
    missing = sorted(f.src_uri for f in files.documentation_pages() if f.src_uri not in known)
    if not missing:
        return nav
    sections: dict[str, list[NavItem]] = {}
    for item in nav:
        if isinstance(item, dict):
            children = next(iter(item.values()))
            if isinstance(children, list):
                folder = _folder_of_section(children)
                if folder and folder != ".":
                    sections.setdefault(folder, children)
    for uri in missing:
        file = files.get_file_from_path(uri)
        text = file.content_string if file is not None else ""
        entry = {title_of(text, uri): uri}
        target = sections.get(str(Path(uri).parent))
        (target if target is not None else nav).append(entry)
    return nav
