"""Native passages and entity lexicons (the contracts in ARCHITECTURE.md)."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from retrieval_bench.data.jsonl import (
    FREE_FORM,
    check_fields,
    optional_str_list,
    read_jsonl,
    read_jsonl_with_ids,
    require_str,
)
from retrieval_bench.errors import DataError
from retrieval_bench.records import NO_META, Entity, Passage

# Record fields (corpus/README.md); any other is refused naming the nearest of these.
PASSAGE_FIELDS = ("id", "text", "title", "doc_id", *FREE_FORM)
LEXICON_FIELDS = ("name", "aliases", "type", "city", *FREE_FORM)


def load_passages(path: Path, known_entities: Collection[str] = ()) -> tuple[Passage, ...]:
    """Passages in file order; with `known_entities`, every meta.entities name must be one."""
    passages: list[Passage] = []
    for line, pid, record in read_jsonl_with_ids(path, "id", "passage id"):
        check_fields(record, PASSAGE_FIELDS, path, line)
        text = require_str(record, "text", path, line)
        title = record.get("title") or ""
        if not isinstance(title, str):
            raise DataError(path, "field 'title' must be a string", line)
        meta = record.get("meta") or {}
        if not isinstance(meta, dict):
            raise DataError(path, "field 'meta' must be an object", line)
        if "entities" in meta:
            unknown = set(optional_str_list(meta, "entities", path, line)) - set(known_entities)
            if known_entities and unknown:
                raise DataError(
                    path,
                    f"meta.entities names entities missing from the lexicon: {sorted(unknown)}",
                    line,
                )
        if "acl" in meta:
            optional_str_list(meta, "acl", path, line)
        doc_id = record.get("doc_id")
        passages.append(
            Passage(
                id=pid,
                text=text,
                title=title,
                doc_id=None if doc_id is None else str(doc_id),
                meta=meta or NO_META,  # one shared empty mapping, not a dict per passage
            )
        )
    if not passages:
        raise DataError(path, "the corpus is empty: no passages")
    return tuple(passages)


def load_lexicon(path: Path) -> tuple[Entity, ...]:
    """Entities with aliases; an alias claimed by two entities is refused, naming both."""
    entities: list[Entity] = []
    owner: dict[str, tuple[str, int]] = {}
    for line, record in read_jsonl(path):
        check_fields(record, LEXICON_FIELDS, path, line)
        name = require_str(record, "name", path, line)
        aliases = optional_str_list(record, "aliases", path, line)
        for surface in {name, *aliases}:
            if surface in owner and owner[surface][0] != name:
                other, other_line = owner[surface]
                raise DataError(
                    path,
                    f"'{surface}' is claimed by '{name}' and by '{other}' (line {other_line})",
                    line,
                )
            owner[surface] = (name, line)
        city = record.get("city")
        entities.append(
            Entity(
                name=name,
                aliases=tuple(a for a in aliases if a != name),
                type=str(record.get("type") or ""),
                city=city if isinstance(city, str) else None,
            )
        )
    return tuple(entities)
