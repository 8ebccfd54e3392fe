"""The docs site builds with `mkdocs build --strict` (mkdocs.yml): no broken link, no missing
page or anchor, no unresolved API reference, the generated Reference pages rendered, and
Chinese text segmented for search."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import IN_CI, ROOT


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=600,
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr[-6000:]}"
    return out


@pytest.mark.slow
def test_every_page_is_built(site: Path) -> None:
    sources = {
        p.relative_to(ROOT / "docs").with_suffix(".html")
        for p in (ROOT / "docs").rglob("*.md")
        if "hooks" not in p.parts
    }
    built = {p.relative_to(site) for p in site.rglob("*.html")}
    assert sources <= built, sorted(map(str, sources - built))
    assert (site / "reference" / "exit-codes.html").is_file()


@pytest.mark.slow
def test_search_segments_chinese(site: Path) -> None:
    """Material's search plugin runs Chinese text through jieba (a dependency) and joins the
    words with zero-width spaces, which mkdocs.yml's separator splits on: a Chinese word of the
    home page is a term of its own in the index."""
    index = json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))
    separator = index["config"]["separator"]
    assert "\\u200b" in separator, separator
    home = next(doc for doc in index["docs"] if doc["location"] == "index.html")
    assert "\u200b检索\u200b" in home["text"], home["text"][:400]


def _pages_with_chinese(site: Path) -> list[Path]:
    from support.glyphs import HAN

    return sorted(
        page
        for page in site.rglob("*.html")
        if "assets" not in page.parts and HAN.search(page.read_text(encoding="utf-8"))
    )


@pytest.mark.slow
def test_chinese_renders_with_no_missing_glyph(site: Path) -> None:
    """Every built page with Chinese text, rendered in the Chromium the tests use: each Chinese
    character is in the character map of a font Chromium drew its element with."""
    from support.chromium import chromium, find_chromium
    from support.glyphs import missing_glyphs

    if find_chromium() is None:
        (pytest.fail if IN_CI else pytest.skip)("no Chromium on PATH (.ci/run installs it)")
    pages = _pages_with_chinese(site)
    assert site / "index.html" in pages
    with chromium() as browser:
        missing = {p.relative_to(site).as_posix(): missing_glyphs(browser, p) for p in pages}
    assert not any(missing.values()), missing


@pytest.mark.slow
def test_a_character_no_font_has_is_reported(tmp_path: Path) -> None:
    """The check sees a missing glyph: U+9FF0 (Unicode 13) is in no font installed here."""
    from support.chromium import chromium, find_chromium
    from support.glyphs import missing_glyphs

    if find_chromium() is None:
        (pytest.fail if IN_CI else pytest.skip)("no Chromium on PATH (.ci/run installs it)")
    page = tmp_path / "tofu.html"
    page.write_text(
        '<html><meta charset="utf-8"><body><article><p>检索\u9ff0</p></article></body></html>',
        encoding="utf-8",
    )
    with chromium() as browser:
        assert missing_glyphs(browser, page) == {"检索\u9ff0": ["\u9ff0"]}
