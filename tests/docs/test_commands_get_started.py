"""Every command in the code blocks of docs/get-started/ runs as written, page by page, each page in
a fresh copy of the repository (`tests/support/doc_commands.py`: which blocks hold commands,
placeholders, exclusions). One module per docs section, so the two workers share the pages."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT
from support.doc_commands import (
    DocCommand,
    Workspaces,
    check_blocks_classified,
    check_placeholders_explained,
    commands_of,
    docs_pages,
    run_command,
    runnable,
)

PAGES = docs_pages("get-started")
RUNNABLE = [cmd for page in PAGES for cmd in runnable(commands_of(page))]


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_blocks_classified_and_placeholders_explained(page: Path) -> None:
    check_blocks_classified(page)
    check_placeholders_explained(page)


@pytest.fixture(scope="module")
def workspaces(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspaces]:
    spaces = Workspaces(tmp_path_factory)
    yield spaces
    spaces.close()


@pytest.mark.slow
@pytest.mark.parametrize("cmd", RUNNABLE, ids=[cmd.id for cmd in RUNNABLE])
def test_command_runs(cmd: DocCommand, workspaces: Workspaces) -> None:
    run_command(cmd, workspaces.for_page(cmd))
