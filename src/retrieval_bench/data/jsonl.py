"""JSON Lines reading that names the file and line of the first bad record."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

from retrieval_bench.errors import DataError, nearest_hint


def read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line number, object) for each non-blank line; a bad line raises DataError."""
    if not path.is_file():
        raise DataError(path, "file not found")
    try:
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
                    raise DataError(
                        path, f"expected a JSON object, got {type(record).__name__}", number
                    )
                yield number, record
    except UnicodeDecodeError as exc:
        raise DataError(path, f"not valid UTF-8 ({exc.reason} at byte {exc.start})") from None


def read_jsonl_with_ids(
    path: Path, key: str, what: str
) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """`read_jsonl`, plus each record's id from field `key` (an integer is read as its string);
    an id seen before raises DataError naming both lines (`what` names the id, e.g. "passage id").
    """
    first_line: dict[str, int] = {}
    for number, record in read_jsonl(path):
        value = record.get(key)
        if isinstance(value, int):
            value = str(value)
        if not isinstance(value, str) or not value.strip():
            raise DataError(path, f"field '{key}' must be a non-empty string", number)
        check_trec_id(value, what, path, number)
        if value in first_line:
            raise DataError(
                path, f"duplicate {what} {value!r} (first on line {first_line[value]})", number
            )
        first_line[value] = number
        yield number, value, record


def check_trec_id(value: str, what: str, path: Path, line: int) -> None:
    """Ids end up in whitespace-separated TREC files: refuse one they cannot hold, here, with
    its line, rather than when the job writes its outputs."""
    if any(ch.isspace() for ch in value):
        raise DataError(path, f"{what} {value!r} contains whitespace (TREC files forbid it)", line)


# Free-form fields every native record may carry for people (nothing checks their content).
FREE_FORM = ("meta", "notes")


def check_fields(record: dict[str, Any], known: Collection[str], path: Path, line: int) -> None:
    """A field outside `known` is a typo until proven otherwise: a misspelt optional field
    (`expected_entites`) would otherwise be read as absent and its labels silently dropped."""
    for key in record:
        if key not in known:
            raise DataError(path, f"unknown field {key!r}; {nearest_hint(key, list(known))}", line)


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
