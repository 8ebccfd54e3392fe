"""Every command in the code blocks of the docs site (docs/**/*.md) runs as written, page by page,
each page in a fresh copy of the repository (`tests/support/doc_commands.py`: which blocks hold
commands, placeholders, exclusions). One test class per page (`TestCommandsOf_how_to_tune_md`),
so the two workers share the pages and `-k how_to` picks a section."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ROOT
from support.doc_commands import (
    check_blocks_classified,
    check_placeholders_explained,
    docs_pages,
    page_classes,
)

PAGES = docs_pages()


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_blocks_classified_and_placeholders_explained(page: Path) -> None:
    check_blocks_classified(page)
    check_placeholders_explained(page)


globals().update(page_classes(PAGES))
