"""The optional C extensions setup.py builds, each loaded once, or None where it was not built.

Why one place: each extension has a pure-Python path (jieba's own cut, numpy) that gives the
same results, and every caller decides by the same test whether the compiled one is there;
tests patch `extension` to run the Python paths too.
"""

from __future__ import annotations

import importlib
from functools import cache
from typing import Any


@cache
def load(name: str) -> tuple[Any, str | None]:
    """(the module `retrieval_bench.<name>`, None) or (None, why it could not be imported)."""
    try:
        return importlib.import_module(f"retrieval_bench.{name}"), None
    except ImportError as exc:
        return None, f"{type(exc).__name__}: {exc}"


def extension(name: str) -> Any:
    """The module `retrieval_bench.<name>`, or None where it was not built."""
    return load(name)[0]
