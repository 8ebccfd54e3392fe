"""JSON Lines reading that names the file and line of the first bad record."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from retrieval_bench.errors import DataError


def read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line number, object) for each non-blank line; a bad line raises DataError."""
    if not path.is_file():
        raise DataError(path, "file not found")
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(
                    path, f"malformed JSON: {exc.msg} (column {exc.colno})", number
                ) from None
            if not isinstance(record, dict):
                raise DataError(path, "expected a JSON object", number)
            yield number, record


def require_str(record: dict[str, Any], key: str, path: Path, line: int) -> str:
    value = record.get(key)
    if not isinstance(value, str) or not value.strip():
        raise DataError(path, f"field '{key}' must be a non-empty string", line)
    return value


def optional_str_list(record: dict[str, Any], key: str, path: Path, line: int) -> tuple[str, ...]:
    value = record.get(key)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DataError(path, f"field '{key}' must be a list of strings", line)
    return tuple(value)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
