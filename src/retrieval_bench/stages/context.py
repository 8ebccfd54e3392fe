"""The context stage: from the final ranking, the passages a generator is given.

Rule (what a RAG context builder does with a character budget): walk the final ranking best
first; a passage joins the context when its text fits what is left of `budget_chars` and its
document (`doc_id`; a passage without one is its own document) holds fewer than `max_per_doc`
passages (0: no cap; both keys of `stages.context`). A passage that does not fit is skipped and
the walk goes on, so a shorter passage further down can still use the budget (stopping at the first
misfit would let one long passage at rank 1 empty the context). The context keeps the final
ranking's order and scores. A passage's length is that of its text as every arm reads it
(title, newline, text), in characters (code points); separators a prompt adds are not counted.

A budget smaller than the corpus's shortest passage could hold nothing and is refused when the
stage is built, naming `stages.context.budget_chars`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from retrieval_bench.config.stages import ContextConfig
from retrieval_bench.protocols import AFTER_CUT

if TYPE_CHECKING:
    from retrieval_bench.protocols import BuildContext
from retrieval_bench.errors import ConfigError
from retrieval_bench.records import EvalQuery, Passage, Ranked

# Why a context is empty when the final ranking was not: none of its passages fit the budget.
OVER_BUDGET = "over_budget"


@dataclass
class ContextBudget(ContextConfig):
    """`stages.context`: a StageSpec after the top_k cut, on with `stages.context.budget_chars=N`.
    Its keyword arguments are `config.stages.ContextConfig`'s fields."""

    placement: ClassVar[str] = AFTER_CUT

    def __post_init__(self) -> None:
        self.validate()  # a bad value fails when the config is read

    def active(self, ctx: BuildContext) -> bool:
        return self.enabled

    def build(self, name: str, ctx: BuildContext) -> ContextBuilder:
        """Refuses (ConfigError) a budget below the corpus's shortest passage."""
        return ContextBuilder(self, ctx.passages, ctx.texts, f"stages.{name}.budget_chars")


class ContextBuilder:
    """The context stage itself: what of `final` fits the budget and the per-document cap."""

    def __init__(
        self,
        cfg: ContextConfig,
        passages: Sequence[Passage],
        texts: Sequence[str],
        budget_key: str = "stages.context.budget_chars",
    ) -> None:
        self.cfg = cfg
        self.lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
        self.shortest = int(self.lengths.min()) if len(self.lengths) else 0
        if cfg.budget_chars < self.shortest:
            raise ConfigError(
                budget_key,
                f"{cfg.budget_chars} characters is smaller than the corpus's shortest passage "
                f"({self.shortest} characters): no context could hold a passage; set "
                f"{budget_key}>={self.shortest}, or 0 for no context stage",
            )
        # Read only for the few passages a final ranking holds, and only with a cap.
        self.passages = passages
        self.counts = {"queries": 0, "kept": 0, "chars": 0, "over_budget": 0, "doc_cap": 0}

    def document(self, index: int) -> tuple[bool, str]:
        """Passage `index`'s document: its doc_id, or for a passage without one the passage
        itself (flagged, so a passage id equal to some doc_id is still another document)."""
        passage = self.passages[index]
        return (False, passage.doc_id) if passage.doc_id else (True, passage.id)

    def select(self, indices: np.ndarray) -> list[int]:
        """Positions (into `indices`, a ranking best first) of the passages the context holds."""
        left = self.cfg.budget_chars
        cap = self.cfg.max_per_doc
        lengths = self.lengths[indices].tolist()
        if not cap and sum(lengths) <= left:  # everything fits: the common short ranking
            self.counts["chars"] += sum(lengths)
            return list(range(len(lengths)))
        documents = [self.document(i) for i in indices.tolist()] if cap else []
        taken: dict[tuple[bool, str], int] = {}
        kept: list[int] = []
        over_budget = doc_cap = 0
        for position, length in enumerate(lengths):
            if length > left:
                over_budget += 1
                continue
            if cap:
                document = documents[position]
                if taken.get(document, 0) >= cap:
                    doc_cap += 1
                    continue
                taken[document] = taken.get(document, 0) + 1
            kept.append(position)
            left -= length
            if left < self.shortest:
                break  # no passage of the corpus fits any more
        self.counts["over_budget"] += over_budget
        self.counts["doc_cap"] += doc_cap
        self.counts["chars"] += self.cfg.budget_chars - left
        return kept

    def apply(self, queries: Sequence[EvalQuery], rankings: Sequence[Ranked]) -> list[Ranked]:
        out = []
        for ranked in rankings:
            kept = self.select(ranked.indices)
            if len(kept) == ranked.returned:
                out.append(ranked)  # all of it fits: the same ranking
            else:
                out.append(
                    Ranked(
                        indices=ranked.indices[kept],
                        scores=ranked.scores[kept],
                        requested=ranked.requested,
                        empty_reason=None if kept else OVER_BUDGET,
                    )
                )
            self.counts["queries"] += 1
            self.counts["kept"] += len(kept)
        return out

    def info(self) -> dict[str, Any]:
        """The manifest's record: the settings, and what the budget did over the job."""
        queries = self.counts["queries"]
        return {
            "budget_chars": self.cfg.budget_chars,
            "max_per_doc": self.cfg.max_per_doc,
            "rule": "best first; a passage that does not fit is skipped, the walk goes on",
            "shortest_passage_chars": self.shortest,
            "passages_per_query": round(self.counts["kept"] / queries, 4) if queries else None,
            "chars_per_query": round(self.counts["chars"] / queries, 2) if queries else None,
            "skipped_over_budget": self.counts["over_budget"],
            "skipped_doc_cap": self.counts["doc_cap"],
        }
