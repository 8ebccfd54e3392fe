"""Regenerate docs/explorer.png (the README's screenshot): the shipped `travel` set's hybrid job,
its report.html opened in headless Chromium and used as the browser test uses it
(`chromium.explore`: filter the `negation` type, open the first query, show a passage's text);
and docs/img/comparison-heatmap.png (the first-comparison tutorial's): the per-type heatmap of
the bm25 / dense / hybrid sweep's comparison.html.

    make explorer-png        # or: .venv/bin/python tests/support/explorer_png.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))  # run as a script: `support` is the tests' package

from support.chromium import chromium, explore  # noqa: E402

TARGET = ROOT / "docs" / "explorer.png"
HEATMAP = ROOT / "docs" / "img" / "comparison-heatmap.png"


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="rb-explorer-") as tmp:
        job = Path(tmp) / "job"
        subprocess.run(
            [sys.executable, "-m", "run", "retriever=hybrid", f"hydra.run.dir={job}"],
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            check=True,
            stdout=subprocess.DEVNULL,
        )
        shown = explore(job / "report.html", "negation", TARGET)
        if shown["errors"]:
            sys.exit(f"console errors: {shown['errors']}")
        ready = f"ready in {shown['ready_s']:.2f} s"
        print(f"{TARGET.relative_to(ROOT)}: query {shown['opened']}, {ready}")
        sweep = Path(tmp) / "sweep"
        subprocess.run(
            [sys.executable, "-m", "run", "-m", "retriever=bm25,dense,hybrid",
             f"hydra.sweep.dir={sweep}"],
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            check=True,
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        with chromium(width=1100, height=800) as browser:
            browser.open(sweep / "comparison.html")
            browser.screenshot(HEATMAP, "#sec-heatmap")
            if browser.errors:
                sys.exit(f"console errors: {browser.errors}")
        print(f"{HEATMAP.relative_to(ROOT)}: the sweep's per-type heatmap")


if __name__ == "__main__":
    main()
