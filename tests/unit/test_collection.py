"""Collection imports every test module in every xdist worker, whether or not that worker runs
it, so a test module imports at its top only what is light (ARCHITECTURE.md, Tests): the heavy
libraries below are imported in the tests that use them."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT

# What a test module once imported at its top, and what each costs a worker at collection
# (python -X importtime): scipy.stats ~0.5 s, pypinyin ~0.3-0.5 s, matplotlib ~0.35 s, pandas
# ~0.2 s, scikit-learn ~1.3 s, mlflow ~1.2 s.
HEAVY = ("scipy.stats", "pypinyin", "matplotlib", "pandas", "sklearn", "mlflow")


@pytest.mark.slow  # collects the whole suite in a fresh interpreter
def test_collecting_the_suite_imports_no_heavy_library() -> None:
    code = (
        "import sys, pytest\n"
        "status = pytest.main(['--collect-only', '-q', '-p', 'no:cacheprovider', 'tests'])\n"
        f"print('imported:', sorted(m for m in {HEAVY!r} if m in sys.modules), int(status))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.stdout.splitlines()[-1] == "imported: [] 0", proc.stdout[-3000:] + proc.stderr
