"""Which passages a query may be answered from: cities, permissions, exclusions.

One mask per query, the same for every arm, applied before any arm ranks, so no arm's pool
is ever cut first and filtered afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from retrieval_bench.config.filters import FilterConfig
from retrieval_bench.records import EvalQuery, FilterDecision, Passage


class PassageFilter:
    def __init__(self, passages: Sequence[Passage], config: FilterConfig) -> None:
        self.config = config
        self.n = len(passages)
        self.city = np.array([str(p.meta.get("city") or "") for p in passages], dtype=object)
        self.acl = [
            None if p.meta.get("acl") is None else frozenset(p.meta["acl"]) for p in passages
        ]
        # Built once per job, so a query's filter costs no pass over the passages in Python.
        self.by_entity: dict[str, list[int]] = {}
        for i, passage in enumerate(passages):
            for entity in dict.fromkeys(passage.meta.get("entities") or ()):
                self.by_entity.setdefault(entity, []).append(i)
        self.has_acl = any(a is not None for a in self.acl)
        self._readable: dict[str | None, np.ndarray] = {}

    def possible(self, queries: Sequence[EvalQuery], exclusions: bool) -> tuple[str, ...]:
        """The filters that may apply to some query of this job, known before any ranking
        (`exclusions`: whether a strategy may send exclusions, i.e. a router is on)."""
        kinds = []
        if self.config.city and any(self.city):
            kinds.append("city")
        if self.config.permissions and self.has_acl and any(q.user_role for q in queries):
            kinds.append("permissions")
        if self.config.exclusions and exclusions and self.by_entity:
            kinds.append("exclusions")
        return tuple(kinds)

    def readable(self, role: str | None) -> np.ndarray:
        """Passages a user with `role` may read: no ACL means everyone; no role reads only those.
        One mask per role, computed once (read-only: callers combine it into their own)."""
        if role not in self._readable:
            mask = np.fromiter((a is None or role in a for a in self.acl), dtype=bool, count=self.n)
            mask.flags.writeable = False
            self._readable[role] = mask
        return self._readable[role]

    def decide(
        self, cities: Sequence[str], user_role: str | None, excluded_entities: Sequence[str]
    ) -> FilterDecision:
        mask = np.ones(self.n, dtype=bool)
        applied: list[str] = []
        if self.config.city and cities:
            # Passages with no city are kept: nothing says they are elsewhere.
            mask &= np.isin(self.city, [*cities, ""])
            applied.append("city")
        if self.config.permissions and self.has_acl and user_role is not None:
            mask &= self.readable(user_role)
            applied.append("permissions")
        if self.config.exclusions and excluded_entities:
            for entity in excluded_entities:
                mask[self.by_entity.get(entity, [])] = False
            applied.append("exclusions")
        return FilterDecision(mask=mask if applied else None, applied=tuple(applied))
