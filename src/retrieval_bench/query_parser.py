"""Deterministic query parsing (no model): what the filters and the router read."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class ParsedQuery:
    cities: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    excluded_entities: tuple[str, ...] = ()
    negation_cues: tuple[str, ...] = ()

    def to_json(self) -> dict[str, list[str]]:
        return {key: list(value) for key, value in asdict(self).items()}


class QueryParser:
    """Finds the corpus's cities named in a query (longest name first, no overlaps)."""

    def __init__(self, cities: Iterable[str]) -> None:
        self.cities = sorted({c for c in cities if c}, key=lambda c: (-len(c), c))

    def find_cities(self, text: str) -> tuple[str, ...]:
        found: list[str] = []
        taken = [False] * len(text)
        for city in self.cities:
            start = text.find(city)
            while start != -1:
                span = range(start, start + len(city))
                if not any(taken[i] for i in span):
                    for i in span:
                        taken[i] = True
                    if city not in found:
                        found.append(city)
                start = text.find(city, start + 1)
        return tuple(sorted(found, key=text.find))

    def parse(self, text: str) -> ParsedQuery:
        return ParsedQuery(cities=self.find_cities(text))
