"""The top_k cut: `final`, the ranking every headline metric scores, is the stage before it cut
to `top_k`. A plug-in like any stage (`stages.final`), the one stage placed at the cut: the
stages before it see the whole combined ranking, those after it see `final`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from retrieval_bench.protocols import CUT
from retrieval_bench.records import EvalQuery, Ranked

if TYPE_CHECKING:
    from retrieval_bench.protocols import BuildContext


def cut(ranked: Ranked, k: int) -> Ranked:
    """`ranked`'s best k, asked for k (an empty ranking keeps its reason)."""
    return Ranked(ranked.indices[:k], ranked.scores[:k], k, ranked.empty_reason)


class TopKCut:
    """`stages.final`: each query's ranking cut to `top_k`. It takes no settings: `top_k` is the
    job's, and every metric @top_k is read at this cut."""

    placement: ClassVar[str] = CUT

    def active(self, ctx: BuildContext) -> bool:
        return True

    def build(self, name: str, ctx: BuildContext) -> TopKCutStage:
        return TopKCutStage(ctx.cfg.top_k)


@dataclass(frozen=True)
class TopKCutStage:
    """The cut itself."""

    k: int

    def apply(self, queries: Sequence[EvalQuery], rankings: Sequence[Ranked]) -> list[Ranked]:
        return [cut(ranked, self.k) for ranked in rankings]

    def info(self) -> dict[str, Any]:
        return {"top_k": self.k}
