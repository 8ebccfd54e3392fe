"""TREC run files (`qid Q0 docid rank score tag`) and qrels (`qid 0 docid grade`).

trec_eval ignores the rank column and orders each query's documents by score descending, then by
docid descending (byte order). Writing and reading here both use that order, so a run exported
by this project scores the same in trec_eval as it does here, ties included.

A gzipped run or qrels file (`.run.gz`, how TREC runs are usually shipped) is read as it is,
recognised by its first bytes.

Writes are atomic (temp file in the same folder, then `os.replace`) and byte-deterministic:
queries sorted by id, scores written with `repr` so they read back to the identical float.
"""

from __future__ import annotations

import gzip
import math
import os
import re
import zlib
from collections.abc import Iterable, Mapping
from typing import IO

from retrieval_bench.errors import DataError
from retrieval_bench.io.atomic import atomic_write_text

Run = dict[str, list[tuple[str, float]]]
Qrels = dict[str, dict[str, int]]

_WHITESPACE = re.compile(r"\s")
_INTEGER = re.compile(r"[+-]?[0-9]+")
# Decimal or exponent notation, as C's atof reads it (no inf/nan, no underscores).
_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


def trec_order(pairs: Iterable[tuple[str, float]]) -> list[tuple[str, float]]:
    """(docid, score) pairs in trec_eval's order: score descending, then docid descending."""
    return sorted(pairs, key=lambda pair: (pair[1], pair[0]), reverse=True)


def run_rankings(run: Mapping[str, Iterable[tuple[str, float]]]) -> dict[str, list[str]]:
    """The ordered id lists scoring works on, from a run already in trec_eval order."""
    return {qid: [doc for doc, _ in pairs] for qid, pairs in run.items()}


def _check_token(value: str, what: str) -> str:
    if not isinstance(value, str) or not value or _WHITESPACE.search(value):
        raise ValueError(f"{what} {value!r} cannot be written to a TREC file (empty or spaces)")
    return value


def write_run(
    path: str | os.PathLike[str],
    run: Mapping[str, Iterable[tuple[str, float]] | Mapping[str, float]],
    tag: str = "retrieval_bench",
) -> None:
    """Write a run; each query's (docid, score) pairs are re-sorted into trec_eval order.

    Raises ValueError for a duplicate docid within a query, a non-finite score, or an id or tag
    that a whitespace-separated format cannot hold.
    """
    _check_token(tag, "tag")
    lines: list[str] = []
    for qid in sorted(run):
        _check_token(qid, "query id")
        docs = run[qid]
        pairs = list(docs.items()) if isinstance(docs, Mapping) else list(docs)
        seen: set[str] = set()
        for doc, score in pairs:
            _check_token(doc, "docid")
            if doc in seen:
                raise ValueError(f"query {qid!r}: docid {doc!r} appears twice in the run")
            seen.add(doc)
            if not math.isfinite(score):
                raise ValueError(f"query {qid!r}: docid {doc!r} has non-finite score {score!r}")
        ordered = trec_order((doc, float(score)) for doc, score in pairs)
        lines.extend(
            f"{qid} Q0 {doc} {rank} {score!r} {tag}\n"
            for rank, (doc, score) in enumerate(ordered, start=1)
        )
    atomic_write_text(path, "".join(lines))


def write_qrels(path: str | os.PathLike[str], qrels: Mapping[str, Mapping[str, int]]) -> None:
    """Write qrels sorted by query id, then docid (deterministic bytes)."""
    lines: list[str] = []
    for qid in sorted(qrels):
        _check_token(qid, "query id")
        for doc in sorted(qrels[qid]):
            grade = qrels[qid][doc]
            if isinstance(grade, bool) or not isinstance(grade, int):
                raise ValueError(f"query {qid!r}: grade of {doc!r} must be an int, got {grade!r}")
            lines.append(f"{qid} 0 {_check_token(doc, 'docid')} {grade}\n")
    atomic_write_text(path, "".join(lines))


# The first bytes of a gzip stream (RFC 1952): how TREC runs and qrels are usually shipped.
GZIP_MAGIC = b"\x1f\x8b"


def open_text(path: str | os.PathLike[str]) -> IO[str]:
    """`path` opened for reading as UTF-8 text, gunzipped on the way when it is gzip
    (recognised by its first bytes, whatever its name: `.run.gz`, `.qrels.gz`)."""
    with open(path, "rb") as fh:
        compressed = fh.read(2) == GZIP_MAGIC
    if compressed:
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def _lines(path: str | os.PathLike[str]) -> Iterable[tuple[int, list[str]]]:
    """(line number, whitespace-split fields) for each non-blank line (of the uncompressed
    text, for a gzipped file)."""
    try:
        with open_text(path) as fh:
            for number, line in enumerate(fh, start=1):
                fields = line.split()
                if fields:
                    yield number, fields
    except UnicodeDecodeError as exc:
        raise DataError(path, f"not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise DataError(path, f"not a readable gzip file ({exc or type(exc).__name__})") from None


def _first_line(path: str | os.PathLike[str], qid: str, doc: str) -> int | None:
    """Where (qid, doc) first appears; only called to report a duplicate, so the fast path
    never keeps a line number per entry."""
    for number, fields in _lines(path):
        if len(fields) in (4, 6) and fields[0] == qid and fields[2] == doc:
            return number
    return None


def _twice(path: str | os.PathLike[str], number: int, qid: str, doc: str, what: str) -> DataError:
    """The error for a (qid, docid) met again on line `number`, naming the first line too."""
    return DataError(
        path,
        f"query {qid!r}: docid {doc!r} {what} (first on line {_first_line(path, qid, doc)})",
        number,
    )


def read_run(
    path: str | os.PathLike[str], duplicates: list[tuple[str, str, int]] | None = None
) -> Run:
    """Read a run, ignoring the rank column and re-sorting as trec_eval does.

    A malformed line raises DataError with the file and line. So does a (qid, docid) seen twice,
    unless `duplicates` is given: then each repeat is appended there as (qid, docid, line) and
    the first line's score is kept (a run from another system is counted, not refused).
    """
    run: dict[str, dict[str, float]] = {}
    for number, fields in _lines(path):
        if len(fields) != 6:
            raise DataError(
                path, f"expected 6 fields 'qid Q0 docid rank score tag', got {len(fields)}", number
            )
        qid, _, doc, rank, score_text, _ = fields
        if not _INTEGER.fullmatch(rank):
            raise DataError(path, f"rank {rank!r} is not an integer", number)
        score = float(score_text) if _NUMBER.fullmatch(score_text) else math.nan
        if not math.isfinite(score):
            raise DataError(path, f"score {score_text!r} is not a finite number", number)
        docs = run.setdefault(qid, {})
        if doc in docs:
            if duplicates is None:
                raise _twice(path, number, qid, doc, "appears twice")
            duplicates.append((qid, doc, number))
            continue
        docs[doc] = score
    return {qid: trec_order(docs.items()) for qid, docs in run.items()}


def read_qrels(path: str | os.PathLike[str]) -> Qrels:
    """Read qrels (`qid iter docid grade`); the iteration column is ignored, as in trec_eval."""
    qrels: Qrels = {}
    for number, fields in _lines(path):
        if len(fields) != 4:
            raise DataError(
                path, f"expected 4 fields 'qid 0 docid grade', got {len(fields)}", number
            )
        qid, _, doc, grade_text = fields
        if not _INTEGER.fullmatch(grade_text):
            raise DataError(path, f"grade {grade_text!r} is not an integer", number)
        labels = qrels.setdefault(qid, {})
        if doc in labels:
            raise _twice(path, number, qid, doc, "judged twice")
        labels[doc] = int(grade_text)
    return qrels
