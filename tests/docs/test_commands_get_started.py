"""Every command in the code blocks of docs/get-started/ runs as written, page by page, each page in
a fresh copy of the repository (`tests/support/doc_commands.py`: which blocks hold commands,
placeholders, exclusions). One module per docs section and one test class per page, so the two
workers share the pages."""

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

PAGES = docs_pages("get-started")


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_blocks_classified_and_placeholders_explained(page: Path) -> None:
    check_blocks_classified(page)
    check_placeholders_explained(page)


globals().update(page_classes(PAGES))
