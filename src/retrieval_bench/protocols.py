"""The protocols every plug-in implements, and what it is built from.

A job's pipeline is arms -> combiner -> the later stages of `stages`, in the order they run
(those before the top_k cut, the cut itself `final`, those after it: each where its class's
`placement` puts it, or right after the stage its node's `after` names). Every plug-in follows
one convention (retrieval_bench.plugins): a config node names a spec class by `_target_`
(anywhere on the path, not only in this package) and its other keys are the class's keyword
arguments; the spec's `build(name, ctx, ...)` makes the component once the corpus is loaded.
So a new arm, combiner or stage is one class and one YAML file, and nothing in the package
lists their names. An encoder is the `encoder:` node's `_target_`, built with that typed
node.

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
    ranks, never after a cut: the pipeline refuses an arm that returns a passage outside it
    (job.contract). An arm that ranks with its own access rules instead (a remote service)
    declares `applies_own_acl = True`; the mask is then not imposed and leak@K measures what it
    let through. Each result holds at most `k` passages, best first; its `requested` is `k`."""

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


class CombinerSpec(Protocol):
    """What `combiners.<name>._target_` names (`retriever.combine` and a router strategy's
    `combine` pick a node by name). `build` gets the job's context and one weight per pool it
    will fuse, in pool order (None: no weights given), and returns the combiner."""

    def build(
        self, name: str, ctx: BuildContext, weights: tuple[float, ...] | None
    ) -> Combiner: ...


# Where a later stage runs: before the top_k cut (on the whole combined ranking, like a
# reranker), as the cut itself (`final`), or after it (on `final`, like a context builder).
BEFORE_CUT = "before_cut"
CUT = "cut"
AFTER_CUT = "after_cut"
PLACEMENTS = (BEFORE_CUT, CUT, AFTER_CUT)


class Stage(Protocol):
    """A stage after the combiner: re-orders, selects from or adds to each query's ranking.
    `apply` gets one ranking per query (what the stage before it returned) and returns one per
    query, each checked against the stage contract (job.contract) before anything reads it; the
    output is recorded, scored and exported under the stage's name in `stages`."""

    def apply(self, queries: Sequence[EvalQuery], rankings: Sequence[Ranked]) -> list[Ranked]: ...

    def info(self) -> dict[str, Any]:
        """What the manifest records of this stage (settings, work done)."""
        ...


class StageSpec(Protocol):
    """What `stages.<name>._target_` names (the node's `after: <stage>` may say where it runs).

    `placement` says where the stage runs (BEFORE_CUT, CUT or AFTER_CUT): the pipeline has
    exactly one CUT stage (`final`), every BEFORE_CUT stage before it and every AFTER_CUT stage
    after it. A BEFORE_CUT stage re-orders or selects from what it is given, never returns
    more passages than that (job.contract refuses it). `active(ctx)` says whether the stage
    runs under the job's settings (a reranker without a model, a context with no budget: off,
    so the shipped stages [rerank, final, context] are [final] by default); `build`
    makes it once the corpus is loaded; an optional `check(name, ctx)` runs for every stage
    before any arm builds."""

    placement: str

    def active(self, ctx: BuildContext) -> bool: ...

    def build(self, name: str, ctx: BuildContext) -> Stage: ...


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
