"""The judge's answers on disk, one file per pair, so a rerun asks nothing twice and a killed
run resumes where it stopped.

The key is the sha256 of what decides an answer: the query, the passage text, the prompt's
sha256 (a cross-encoder: the fact that it is a score) and the model (a chat model's name; a
cross-encoder's file fingerprint). Each answer is written whole as soon as it arrives (temp
file, then rename), under `<cache_dir>/judge/<2 hex>/<key>.json`; an answer that is not a grade
is not cached, so a rerun asks for it again.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from retrieval_bench.data.hashes import canonical_sha256
from retrieval_bench.io.atomic import atomic_write_json
from retrieval_bench.io.folders import writable_dir
from retrieval_bench.judge.files import CACHE_SUBDIR


class JudgeCache:
    def __init__(self, cache_dir: Path, flag: str = "--cache-dir") -> None:
        self.root = writable_dir(Path(cache_dir), flag) / CACHE_SUBDIR
        self.hits = 0
        self.writes = 0

    @staticmethod
    def key(parts: Sequence[str]) -> str:
        return canonical_sha256(list(parts))

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        path = self._path(key)
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return None  # unreadable: asked again, and rewritten whole
        if not isinstance(entry, dict):
            return None
        self.hits += 1
        return entry

    def put(self, key: str, entry: dict[str, Any]) -> None:
        atomic_write_json(self._path(key), entry, indent=None)
        self.writes += 1
