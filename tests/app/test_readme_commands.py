"""Every command in README.md's code blocks runs as written, so the README cannot drift.

How commands are read from a page, which are excluded, how placeholders are filled and the fresh
copy of the repository they run in: `tests/support/doc_commands.py`, which the docs site's
pages share (`tests/docs/test_commands.py`).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from conftest import ROOT
from support.doc_commands import (
    EXCLUDED,
    DocCommand,
    Workspaces,
    check_blocks_classified,
    check_placeholders_explained,
    commands_of,
    run_command,
    runnable,
)

README = ROOT / "README.md"
COMMANDS = commands_of(README)
RUNNABLE = runnable(COMMANDS)


def test_every_code_block_is_classified() -> None:
    check_blocks_classified(README)


def test_exclusions_name_commands_of_the_pages() -> None:
    """An exclusion whose command left the README and every docs page is stale: remove it."""
    written = {cmd.code for cmd in COMMANDS}
    for page in sorted((ROOT / "docs").rglob("*.md")):
        written |= {cmd.code for cmd in commands_of(page)}
    assert set(EXCLUDED) <= written, set(EXCLUDED) - written


def test_every_placeholder_has_a_filler_and_is_explained() -> None:
    check_placeholders_explained(README)


@pytest.fixture(scope="module")
def workspaces(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspaces]:
    spaces = Workspaces(tmp_path_factory)
    yield spaces
    spaces.close()


@pytest.mark.slow
@pytest.mark.parametrize("cmd", RUNNABLE, ids=[cmd.id for cmd in RUNNABLE])
def test_readme_command_runs(cmd: DocCommand, workspaces: Workspaces) -> None:
    run_command(cmd, workspaces.for_page(cmd))
