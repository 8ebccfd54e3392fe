"""The protocols every pluggable component implements, and what it is built from.

A job's pipeline is arms -> combiner -> later stages (rerank) -> cut to top_k (`final`) ->
after-cut stages (context). Each arm is named in `retriever.arms` and built from the config node
`arms.<name>`: its `_target_` is a class (anywhere on the path, not only in this package) that
Hydra instantiates with the node's other keys, and whose `build(name, ctx)` returns the arm. So a
new arm is one class and one YAML file, and nothing in the package lists arm names.

This module imports no implementation: the pipeline, the plug-ins and user code all depend on
it, and it only on the records and the tie-break below it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from retrieval_bench.records import Entity, EvalQuery, Passage, Ranked, passage_text
from retrieval_bench.tiebreak import TieBreak

if TYPE_CHECKING:
    from retrieval_bench.config import RunConfig


@dataclass
class BuildContext:
    """What a component may read while it builds: the corpus, the queries it will be asked,
    the job's whole config, and where the shared caches live.

    `stats` is the manifest's per-component record: a component writes what it did
    (`ctx.stats["embeddings"]`, ...) so the manifest says how each number was produced."""

    passages: Sequence[Passage]
    queries: Sequence[EvalQuery]
    cfg: RunConfig
    tie_break: TieBreak
    cache_dir: Path
    # The dataset's entities (their names and aliases join the tokenizer's lexicon).
    entities: Sequence[Entity] = ()
    # The filters that may apply to some query (filters.PassageFilter.possible): an index that
    # cannot take them fails before any work.
    possible_filters: tuple[str, ...] = ()
    stats: dict[str, Any] = field(default_factory=dict)

    @cached_property
    def ids(self) -> list[str]:
        return [p.id for p in self.passages]

    @cached_property
    def texts(self) -> list[str]:
        return [passage_text(p) for p in self.passages]

    @cached_property
    def positions(self) -> dict[str, int]:
        """Passage id -> its index in the corpus order every `Ranked` refers to."""
        return {pid: i for i, pid in enumerate(self.ids)}


@runtime_checkable
class Arm(Protocol):
    """One first-stage retriever of a job: ranks the corpus for a batch of queries.

    `allowed[i]` is query i's filter mask (None: every passage); an arm applies it before it
    ranks, never after a cut, or says in its docs that it cannot (a remote service ranks with its
    own access rules, which is what leak@K then measures). Each result's `requested` is `k`."""

    def search(
        self, queries: Sequence[EvalQuery], k: int, allowed: Sequence[np.ndarray | None]
    ) -> list[Ranked]: ...

    def info(self) -> dict[str, Any]:
        """What the manifest records of this arm (index kind, size, latency, counts)."""
        ...


class ArmSpec(Protocol):
    """What `arms.<name>._target_` names: built from the node's keys when the config is read
    (so a bad key fails before any work), then `build` makes the arm once the corpus is
    loaded. A spec may also define `check(name, ctx) -> None`, called for every arm of the job
    before any arm builds, for what can fail without building anything (a model that is not on
    disk, an index that cannot take the job's filters)."""

    def build(self, name: str, ctx: BuildContext) -> Arm: ...


class Combiner(Protocol):
    """Turns several arms' pools for one query into one ranking (RRF, score fusion, fill)."""

    def combine(self, pools: Sequence[Ranked], tie_break: TieBreak) -> Ranked: ...


class LaterStage(Protocol):
    """A stage after fusion that re-orders or selects from each query's ranking (a reranker
    before the top_k cut, a context builder after it); its output is recorded under `name`."""

    name: str

    def apply(self, queries: Sequence[EvalQuery], rankings: Sequence[Ranked]) -> list[Ranked]: ...

    def info(self) -> dict[str, Any]: ...


class Encoder(Protocol):
    """Turns text into float32 L2-normalised row vectors.

    `identity()` holds everything that changes the vectors (model, path, pooling, max length,
    instruction, precision); the embedding cache keys on it, so two encoders with equal identity
    must produce the same vectors.
    """

    def identity(self) -> dict[str, Any]: ...

    def dimension(self) -> int | None:
        """The vector size, known without encoding (None: only encoding tells)."""
        ...

    def encode_passages(self, texts: list[str]) -> np.ndarray: ...

    def encode_queries(self, texts: list[str]) -> np.ndarray: ...
