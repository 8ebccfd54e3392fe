"""The nav the site builds with: a page mkdocs.yml does not list lands in the section whose
pages share its folder, under its own title; a page in no section's folder at the top level
(docs/hooks/nav_sections.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from conftest import ROOT

sys.path.insert(0, str(ROOT / "docs" / "hooks"))

import nav_sections


class _File:
    def __init__(self, uri: str, text: str) -> None:
        self.src_uri = uri
        self.content_string = text


class _Files:
    def __init__(self, pages: dict[str, str]) -> None:
        self.pages = {uri: _File(uri, text) for uri, text in pages.items()}

    def documentation_pages(self) -> list[_File]:
        return list(self.pages.values())

    def get_file_from_path(self, uri: str) -> _File | None:
        return self.pages.get(uri)


def test_unlisted_pages_join_their_folders_section_under_their_title() -> None:
    nav = [
        {"Home": "index.md"},
        {"How-to guides": [{"Tune": "how-to/tune.md"}]},
        {"Reference": ["reference/index.md", {"Config keys": "reference/config.md"}]},
    ]
    files = _Files(
        {
            "index.md": "# Home",
            "how-to/tune.md": "# Tune",
            "how-to/zeta.md": "# Zeta page\n\ntext",
            "how-to/alpha.md": "no heading",
            "reference/index.md": "# Reference",
            "reference/config.md": "# Config keys",
            "reference/renamed-keys.md": "# Renamed keys",
            "faq.md": "# FAQ",
        }
    )
    completed = nav_sections.completed_nav(nav, files, Path("docs"))
    assert completed == [
        {"Home": "index.md"},
        {
            "How-to guides": [
                {"Tune": "how-to/tune.md"},
                {"Alpha": "how-to/alpha.md"},
                {"Zeta page": "how-to/zeta.md"},
            ]
        },
        {
            "Reference": [
                "reference/index.md",
                {"Config keys": "reference/config.md"},
                {"Renamed keys": "reference/renamed-keys.md"},
            ]
        },
        {"FAQ": "faq.md"},
    ]
