"""What every perturbation kind shares: its settings, what it returns, and its seeded random
source."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Protocol

from retrieval_bench.records import Entity, EvalQuery


@dataclass(frozen=True)
class PerturbSettings:
    """The knobs of the kinds (`robustness.*`, or `python -m run.perturb`'s options)."""

    rate: float = 0.2
    seed: int = 0
    # Perturb characters inside lexicon entities too (homophone); by default they are kept.
    entities_too: bool = False
    truncate_chars: int = 6
    opencc_traditional: str = "s2t"
    opencc_simplified: str = "t2s"
    entities: tuple[Entity, ...] = field(default=(), compare=False)
    # How the settings were given: `robustness` (the job's node) or `--` (run.perturb's flags),
    # so a refusal names the key the user wrote.
    source: str = "robustness"

    def key(self, kind: str) -> str:
        """The key or flag of the OpenCC configuration of `kind` (traditional, simplified)."""
        if self.source == "--":
            return f"--opencc-{kind}"
        return f"{self.source}.opencc_{kind}"


@dataclass(frozen=True)
class Variant:
    """A query as a kind rewrote it, and what changed (`meta.perturbation` minus the kind and
    library, which the caller adds): enough to recompute it from the original."""

    text: str
    changes: dict[str, Any]


class Perturbation(Protocol):
    """One kind: `apply` returns the variant of a query, or why it cannot change it (the query
    is then left out and counted, never passed through unchanged)."""

    kind: str

    def library(self) -> str:
        """The library (and version and settings) that makes the variants, as meta records it."""
        ...

    def apply(self, query: EvalQuery, rng: random.Random) -> Variant | str: ...


def rng_for(seed: int, kind: str, query_id: str) -> random.Random:
    """The random source of one (kind, query): seeded by all three, so a variant does not depend
    on which other kinds or queries were perturbed in the same run."""
    return random.Random(f"{seed}:{kind}:{query_id}")


def replace_positions(text: str, changes: list[tuple[int, str]]) -> str:
    """`text` with the character at each position replaced."""
    chars = list(text)
    for position, new in changes:
        chars[position] = new
    return "".join(chars)
