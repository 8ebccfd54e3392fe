"""Deterministic query parsing (no model): what the filters and the router read.

Everything is found by dictionary lookup over the NFKC-normalised, ASCII-lowercased query, so a
parse costs microseconds and the same query always parses the same way:

- entities: every name and alias of the dataset's lexicon; the longest surface wins where
  two overlap ("亚龙湾热带天堂森林公园" is the park, not 亚龙湾); an alias maps to its
  canonical name;
- cities: the corpus's city names, longest first, no overlaps;
- negation: cue words from config. A prefix cue ("除了", "不想去") excludes the first entity
  or city that follows it within `max_gap` characters in the same clause, plus any joined to it
  by a conjunction ("和", "、"); a suffix cue ("以外") does the same looking backwards.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from retrieval_bench.records import Entity, ParsedQuery
from retrieval_bench.text.tokenizer import normalise, query_length


@dataclass(frozen=True)
class NegationRules:
    """Cue words and scope limits of negation (they come from the router config)."""

    prefix_cues: tuple[str, ...] = ()
    suffix_cues: tuple[str, ...] = ()
    conjunctions: tuple[str, ...] = ()
    clause_breaks: tuple[str, ...] = ()
    max_gap: int = 4


class Span(NamedTuple):
    start: int
    end: int
    surface: str
    value: str  # canonical entity, city or cue


def longest_matches(text: str, table: dict[str, str], max_len: int) -> list[Span]:
    """Every non-overlapping occurrence of the table's surfaces, longest first, in text order."""
    found = [
        Span(i, i + n, text[i : i + n], table[text[i : i + n]])
        for i in range(len(text))
        for n in range(1, min(max_len, len(text) - i) + 1)
        if text[i : i + n] in table
    ]
    found.sort(key=lambda s: (-(s.end - s.start), s.start))
    taken = [False] * len(text)
    kept: list[Span] = []
    for span in found:
        if not any(taken[span.start : span.end]):
            taken[span.start : span.end] = [True] * (span.end - span.start)
            kept.append(span)
    return sorted(kept)


class _Surfaces(NamedTuple):
    """A lookup table (normalised surface -> canonical value) and its longest surface."""

    table: dict[str, str]
    longest: int

    @classmethod
    def of(cls, table: dict[str, str]) -> _Surfaces:
        return cls(table, max(map(len, table), default=0))

    def find(self, text: str) -> list[Span]:
        return longest_matches(text, self.table, self.longest) if self.table else []


def _unique(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(values))


@dataclass
class QueryParser:
    """Finds entities (with aliases), cities and negation in a query; see the module doc."""

    cities: Iterable[str]
    entities: Sequence[Entity] = ()
    negation: NegationRules = field(default_factory=NegationRules)

    def __post_init__(self) -> None:
        self._cities = _Surfaces.of({normalise(c): c for c in self.cities if c})
        # An alias claimed by two entities is refused when the lexicon loads, so this is a map.
        self._entities = _Surfaces.of(
            {normalise(surface): e.name for e in self.entities for surface in (e.name, *e.aliases)}
        )
        self._cues = _Surfaces.of(
            {normalise(c): c for c in (*self.negation.prefix_cues, *self.negation.suffix_cues)}
        )
        self._prefix = {normalise(c) for c in self.negation.prefix_cues}
        self._conjunctions = {normalise(c) for c in self.negation.conjunctions}
        self._breaks = [normalise(b) for b in self.negation.clause_breaks if b]

    def parse(self, text: str) -> ParsedQuery:
        norm = normalise(text)
        entities = self._entities.find(norm)
        cities = self._cities.find(norm)
        # A cue inside an entity's name is part of the name, not a negation.
        cues = [c for c in self._cues.find(norm) if not _overlaps(c, entities)]
        # Cities inside an entity name ("三亚湾") are not separate mentions for negation scope.
        mentions = sorted([*entities, *(c for c in cities if not _overlaps(c, entities))])
        excluded: list[Span] = []
        for cue in cues:
            excluded += self._scope(norm, cue, mentions, forward=cue.surface in self._prefix)
        excluded_ids = {(s.start, s.end) for s in excluded}
        excluded_entities = _unique(s.value for s in entities if (s.start, s.end) in excluded_ids)
        excluded_cities = _unique(s.value for s in cities if (s.start, s.end) in excluded_ids)
        return ParsedQuery(
            cities=tuple(c for c in _unique(s.value for s in cities) if c not in excluded_cities),
            entities=_unique(s.value for s in entities),
            excluded_entities=excluded_entities,
            negation_cues=_unique(c.value for c in cues),
            excluded_cities=excluded_cities,
            mentions=tuple((s.surface, s.value) for s in entities),
            length=query_length(norm),
        )

    def _clause(self, text: str, start: int, end: int) -> tuple[int, int]:
        """The clause around [start, end): bounded by the nearest clause breaks either side."""
        left, right = 0, len(text)
        for brk in self._breaks:
            before = text.rfind(brk, 0, start)
            if before != -1:
                left = max(left, before + len(brk))
            after = text.find(brk, end)
            if after != -1:
                right = min(right, after)
        return left, right

    def _joined(self, text: str, a: Span, b: Span) -> bool:
        """Two mentions in a row (either order) that a conjunction (or nothing) joins:
        "日月湾和石梅湾"."""
        first, second = sorted((a, b))
        gap = text[first.end : second.start].strip()
        return gap == "" or gap in self._conjunctions

    def _scope(self, text: str, cue: Span, mentions: list[Span], forward: bool) -> list[Span]:
        """What a cue excludes: the nearest mention on its side (after a prefix cue, before a
        suffix cue) within `max_gap` and the clause, plus the mentions joined on to it."""
        clause_start, clause_end = self._clause(text, cue.start, cue.end)
        if forward:
            near = [m for m in mentions if m.start >= cue.end and m.end <= clause_end]
        else:  # nearest first
            near = [m for m in reversed(mentions) if m.end <= cue.start and m.start >= clause_start]
        if not near:
            return []
        gap = near[0].start - cue.end if forward else cue.start - near[0].end
        if gap > self.negation.max_gap:
            return []
        scope = [near[0]]
        for nxt in near[1:]:
            if not self._joined(text, scope[-1], nxt):
                break
            scope.append(nxt)
        return scope


def _overlaps(span: Span, others: Sequence[Span]) -> bool:
    return any(span.start < o.end and o.start < span.end for o in others)
