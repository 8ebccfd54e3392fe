"""Values kept in the user's cache folder, so that every process does not rebuild them on start
(USE's tokenizer, jieba's dictionary, the homophone table)."""

from __future__ import annotations

import logging
import os
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from retrieval_bench.io.atomic import atomic_write_bytes

log = logging.getLogger(__name__)

_Built = TypeVar("_Built")


def user_cache_dir() -> Path:
    """This project's folder in the user's cache (`$XDG_CACHE_HOME`, else ~/.cache), beside the
    other model caches of the machine: where values every process would otherwise rebuild on
    start are kept (`stored_or_built`). Deleting it only costs the rebuild."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "retrieval-bench"


def stored_or_built(
    path: Path, build: Callable[[], _Built], accept: Callable[[Any], bool]
) -> _Built:
    """The value pickled at `path` where it unpickles and `accept` takes it, else `build()`,
    then stored there atomically for the next process. `path` must name everything the value
    depends on (a package version, a hash of its input file): what is read is not rebuilt. A
    file that does not unpickle (partial, foreign) is replaced; a folder that cannot be written
    only loses the saving."""
    try:
        stored = pickle.loads(path.read_bytes())
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError):
        stored = None
    if stored is not None and accept(stored):
        return stored  # type: ignore[no-any-return]
    built = build()
    try:
        atomic_write_bytes(path, pickle.dumps(built, protocol=pickle.HIGHEST_PROTOCOL))
    except OSError as exc:
        log.debug("%s not stored: %s", path, exc)
    return built
