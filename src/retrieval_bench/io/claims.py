"""Folders claimed, not just named: a job's (or a tuning's) folder is created by this process,
so two started in the same second never share one; claims nothing was written into are released
at exit."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

_claimed: list[Path] = []
"""Folders this process created through `claim_new_dir` (and the parents it made for them)."""


def claim_new_dir(base: str) -> str:
    """Create a folder that no other process has: `base` itself, else `base-2`, `base-3`, ...

    `os.mkdir` fails when the folder exists, so two jobs started in the same second (whose
    timestamped names are equal) never share a folder. Used as the `${new_dir:...}` resolver
    of conf/config.yaml (cached by OmegaConf, so a job's folder is claimed once). Hydra also
    resolves the value while it merges an override of it (experiment=monthly sets its own
    run dir), so a claim may go unused: `release_unused_claims` removes those at exit."""
    parent = Path(base).parent
    missing = [p for p in (parent, *parent.parents) if not p.exists()]
    parent.mkdir(parents=True, exist_ok=True)
    _claimed.extend(reversed(missing))
    candidate, n = base, 1
    while True:
        try:
            os.mkdir(candidate)
        except FileExistsError:
            n += 1
            candidate = f"{base}-{n}"
            continue
        _claimed.append(Path(candidate))
        return candidate


def release_unused_claims() -> None:
    """Remove the folders `claim_new_dir` created that nothing was written into, deepest
    first; `rmdir` refuses a folder that holds anything, so a used one is never touched."""
    while _claimed:
        with contextlib.suppress(OSError):
            _claimed.pop().rmdir()
