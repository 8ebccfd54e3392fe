"""Regenerate the docs site's screenshots under docs/img/: the home page and one how-to page,
built with `mkdocs build` into a temporary folder, served on 127.0.0.1 (as `mkdocs serve`
would; search needs a server) and rendered in the headless Chromium the tests use
(support.chromium), at 1280x800, then reduced to a 64-colour palette (Pillow) so
each stays small.

    make docs-png        # or: .venv/bin/python tests/support/docs_png.py
"""

from __future__ import annotations

import functools
import http.server
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))  # run as a script: `support` is the tests' package

from support.chromium import chromium  # noqa: E402

IMG = ROOT / "docs" / "img"
# page of the built site -> the screenshot it gives
SHOTS = {
    "index.html": "home.png",
    "how-to/learned-router.html": "how-to.png",
}


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # no line per request
        pass


def main() -> None:
    from PIL import Image

    IMG.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rb-site-") as tmp:
        site = Path(tmp) / "site"
        subprocess.run(
            [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(site)],
            cwd=ROOT,
            env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
            check=True,
        )
        handler = functools.partial(_QuietHandler, directory=str(site))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{server.server_address[1]}"
        with server, chromium(width=1280, height=800) as browser:
            for page, name in SHOTS.items():
                browser.send("Page.navigate", url=f"{base}/{page}")
                browser.wait_event("Page.loadEventFired")
                browser.evaluate("document.fonts.ready.then(() => true)")
                target = IMG / name
                browser.screenshot(target)
                Image.open(target).convert("RGB").quantize(colors=64).save(target, optimize=True)
                if browser.errors:
                    sys.exit(f"{page}: console errors: {browser.errors}")
                print(f"{target.relative_to(ROOT)}: {target.stat().st_size // 1024} KiB")
            server.shutdown()


if __name__ == "__main__":
    main()
