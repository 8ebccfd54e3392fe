"""Where the lexicon's entities are mentioned in a query (the router's longest-match lookup over
every name and alias), so a kind can keep them intact or rewrite them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from retrieval_bench.records import Entity
from retrieval_bench.routing.parser import Span, longest_matches

_ASCII_UPPER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


@dataclass
class EntityMentions:
    """Finds mentions in the query as typed (ASCII case folded, which keeps every position), so
    a span's positions are the query's own."""

    entities: Sequence[Entity]

    def __post_init__(self) -> None:
        self.table = {
            surface.translate(_ASCII_UPPER): entity.name
            for entity in self.entities
            for surface in (entity.name, *entity.aliases)
        }
        self.longest = max(map(len, self.table), default=0)
        self.by_name = {entity.name: entity for entity in self.entities}

    def find(self, text: str) -> list[Span]:
        if not self.table:
            return []
        return longest_matches(text.translate(_ASCII_UPPER), self.table, self.longest)

    def covered(self, text: str) -> set[int]:
        """The positions of `text` inside some mention."""
        return {i for span in self.find(text) for i in range(span.start, span.end)}
