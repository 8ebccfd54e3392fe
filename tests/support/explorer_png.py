"""Regenerate docs/explorer.png (the README's screenshot): the shipped `travel` set's hybrid job,
its report.html opened in headless Chromium and used as the browser test uses it
(`chromium.explore`: filter the `negation` type, open the first query, show a passage's text).

    make explorer-png        # or: .venv/bin/python tests/support/explorer_png.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from support.chromium import explore

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "docs" / "explorer.png"


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
    print(f"{TARGET.relative_to(ROOT)}: query {shown['opened']}, ready in {shown['ready_s']:.2f} s")


if __name__ == "__main__":
    main()
