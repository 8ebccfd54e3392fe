"""Which characters of a rendered page no font drew: Chromium reports, per element, the
platform fonts it rendered the element's text with (DevTools `CSS.getPlatformFontsForNode`);
a character that none of those fonts has in its character map was drawn as a missing glyph
(tofu). The font files are found with fontconfig (`fc-match`) and read with fontTools."""

from __future__ import annotations

import functools
import re
import subprocess
from pathlib import Path
from typing import Any

HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3000-\u303f\uff00-\uffef]")
# The elements whose own text is checked: prose, headings, table cells, code, list items.
TEXT_ELEMENTS = ", ".join(f"article {tag}" for tag in ("p", "h1", "h2", "h3", "li", "td", "code"))


@functools.cache
def character_map(postscript_name: str) -> frozenset[int]:
    """The code points the installed font of that PostScript name has glyphs for."""
    from fontTools.ttLib import TTCollection, TTFont

    path = subprocess.run(
        ["fc-match", "-f", "%{file}", f":postscriptname={postscript_name}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    fonts = TTCollection(path).fonts if path.endswith((".ttc", ".otc")) else [TTFont(path)]
    for font in fonts:
        if font["name"].getDebugName(6) == postscript_name:
            return frozenset(font.getBestCmap())
    raise LookupError(f"no installed font is named {postscript_name} (fc-match gave {path})")


def missing_glyphs(browser: Any, page: Path) -> dict[str, list[str]]:
    """For `page` opened in `browser` (support.chromium.Browser): element text -> the Chinese
    characters in it that no font it was rendered with has. Empty when every one was drawn."""
    browser.send("Page.navigate", url=page.resolve().as_uri())
    browser.wait_event("Page.loadEventFired")
    browser.send("DOM.enable")
    browser.send("CSS.enable")
    root = browser.send("DOM.getDocument", depth=-1)["root"]["nodeId"]
    nodes = browser.send("DOM.querySelectorAll", nodeId=root, selector=TEXT_ELEMENTS)["nodeIds"]
    missing: dict[str, list[str]] = {}
    checked = 0
    for node in nodes:
        html = browser.send("DOM.getOuterHTML", nodeId=node)["outerHTML"]
        text = re.sub(r"<[^>]+>", "", html)
        chinese = sorted(set(HAN.findall(text)))
        if not chinese:
            continue
        checked += 1
        fonts = browser.send("CSS.getPlatformFontsForNode", nodeId=node)["fonts"]
        covered: set[int] = set()
        for font in fonts:
            covered |= character_map(font["postScriptName"])
        lacking = [c for c in chinese if ord(c) not in covered]
        if lacking:
            missing[text.strip()[:60]] = lacking
    if checked == 0:
        raise AssertionError(f"{page}: no element holds Chinese text to check")
    return missing
