"""A font with CJK glyphs for every figure, found without user configuration.

Query-type names are Chinese in real eval sets; matplotlib's default DejaVu Sans has no CJK
glyphs and draws them as empty boxes ("Glyph missing" warnings). The font comes from the
`manimgx-fonts-cjk` dependency (Noto Sans CJK, OFL-1.1): a file inside an installed package,
so `pip install` is enough on a machine without root. Where that package is absent, an
installed system CJK font is used (Debian: `apt-get install fonts-noto-cjk`).

Latin text stays in DejaVu Sans: matplotlib falls back per glyph along the family list, so only
characters DejaVu lacks are drawn in the CJK font.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from functools import cache
from pathlib import Path

# The font file inside the manimgx_fonts_cjk package.
PACKAGED_FONT = "NotoSansCJK-VF.otf.ttc"
# The face for Chinese (the file holds JP, KR, SC, TC and HK faces of the same glyphs).
CJK_FAMILY = "Noto Sans CJK SC"
# System CJK families, most preferred first, used when the packaged font is not installed.
SYSTEM_FAMILIES = ("Noto Sans CJK SC", "Noto Sans SC", "WenQuanYi Zen Hei", "Source Han Sans SC")
LATIN_FAMILY = "DejaVu Sans"


def packaged_font_path() -> Path | None:
    """The Noto Sans CJK file shipped in the manimgx-fonts-cjk package, or None without it."""
    try:
        import manimgx_fonts_cjk
    except ImportError:
        return None
    path = Path(manimgx_fonts_cjk.__file__).parent / PACKAGED_FONT
    return path if path.is_file() else None


@cache
def cjk_family() -> str | None:
    """Register the packaged font with matplotlib (once) and name the CJK family to draw with;
    None when neither the package nor a system CJK font is installed."""
    from matplotlib import font_manager  # imported where a figure is drawn, not at start

    path = packaged_font_path()
    if path is not None:
        font_manager.fontManager.addfont(str(path))
        # The file is a variable font whose default instance matplotlib reads as weight 100;
        # it is the only face of the family, so list it as normal weight: otherwise every
        # lookup logs "Failed to find font weight normal" (it draws the same face either way).
        fonts = font_manager.fontManager.ttflist
        for i, entry in enumerate(fonts):
            if entry.fname == str(path):
                fonts[i] = dataclasses.replace(entry, weight=400)
        return CJK_FAMILY
    installed = {entry.name for entry in font_manager.fontManager.ttflist}
    return next((family for family in SYSTEM_FAMILIES if family in installed), None)


@contextlib.contextmanager
def cjk_fonts() -> Iterator[None]:
    """Draw the figures created and saved inside this block with CJK glyphs available."""
    family = cjk_family()
    if family is None:
        yield
        return
    import matplotlib

    # Glyph fallback runs along font.family itself (a generic name there resolves to one font).
    with matplotlib.rc_context({"font.family": [LATIN_FAMILY, family]}):
        yield
