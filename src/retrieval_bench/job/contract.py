"""The contract at every stage boundary, checked before anything else reads a plug-in's output.

An arm's `search` and a stage's `apply` return one `Ranked` per query they were given; each must
hold integer passage indices in range and unique, finite scores, best first (score never
rising down the list), no more passages than asked, and only passages the query's filter
allows. Tied scores are put in the project's order (passage id descending, what trec_eval
imposes) where a plug-in left them otherwise, so the TREC export scores like metrics.json. A
plug-in that breaks the contract fails the job with exit 2 naming the plug-in, the query and
the offending value, instead of a silent wrong number (a passage the permission filter
excluded in `final`) or a raw IndexError.

An arm that applies access control itself (a remote service ranks with its own rules) says so
with `applies_own_acl = True`: the filter is then not imposed on it, and leak@K measures what
it let through (report.md names such arms).

An exception raised inside a plug-in from outside this package is that plug-in's failure, not
the project's: it also exits 2, naming the plug-in and the method (`plugins.guarded_call`); one
raised inside a built-in is a bug and keeps its traceback (exit 3).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from retrieval_bench.plugins import PluginError
from retrieval_bench.records import EvalQuery, Ranked
from retrieval_bench.tiebreak import TieBreak


class ContractError(PluginError):
    """A plug-in returned what the stage contract forbids (module doc)."""


def applies_own_acl(component: object) -> bool:
    """Whether an arm declares that it filters by its own access rules (`applies_own_acl`)."""
    return bool(getattr(component, "applies_own_acl", False))


class StageContract:
    """Checks one arm's or stage's rankings against the contract (module doc) for a corpus of
    `ids` (the order every `Ranked` indexes into)."""

    def __init__(self, ids: Sequence[str], tie_break: TieBreak) -> None:
        self.ids = ids
        self.n = len(ids)
        self.tie_break = tie_break

    def check(
        self,
        what: str,
        queries: Sequence[EvalQuery],
        rankings: Any,
        asked: int | None,
        masks: Sequence[np.ndarray | None] | None,
        inputs: Sequence[np.ndarray] | None = None,
    ) -> list[Ranked]:
        """`rankings` as a list, each checked; `what` names the plug-in ("arm 'bm25'"),
        `asked` the most passages one ranking may hold (None: no limit), `masks` each query's
        filter (None: not imposed). A stage's `inputs` (the passage indices it was given) may hold
        passages an arm trusted with its own ACL let through: those may stay, a stage may not
        bring in others the filter excludes. Raises ContractError at the first break."""
        if not isinstance(rankings, Sequence) or isinstance(rankings, (str, bytes)):
            raise ContractError(
                f"{what} returned {type(rankings).__name__}, not a list of Ranked (one per query)"
            )
        if len(rankings) != len(queries):
            raise ContractError(
                f"{what} returned {len(rankings)} rankings for {len(queries)} queries "
                "(one per query, in the order given)"
            )
        if self._all_kept(rankings, asked, masks):
            return list(rankings)
        checked = []
        for i, (query, ranked) in enumerate(zip(queries, rankings, strict=True)):
            mask = masks[i] if masks is not None else None
            given = inputs[i] if inputs is not None else None
            checked.append(self._check_one(what, query.query_id, ranked, asked, mask, given))
        return checked

    def check_not_grown(
        self,
        what: str,
        queries: Sequence[EvalQuery],
        rankings: Sequence[Ranked],
        given: Sequence[Ranked],
    ) -> None:
        """A stage before the top_k cut re-orders or selects from the ranking it was given: one
        that returns more passages than that (padding a pool the cut then reads) is refused,
        naming the stage, the query and both counts."""
        for query, ranked, before in zip(queries, rankings, given, strict=True):
            if len(ranked.indices) > len(before.indices):
                raise ContractError(
                    f"{what}, query {query.query_id}: returned {len(ranked.indices)} passages, "
                    f"more than the {len(before.indices)} it was given (a stage before the "
                    "top_k cut re-orders or selects from its input)"
                )

    def _all_kept(
        self, rankings: Sequence[Any], asked: int | None, masks: Sequence[np.ndarray | None] | None
    ) -> bool:
        """Whether every ranking keeps the contract as it is (ties already in the project's
        order), checked for the whole batch at once: a few array operations over all rankings
        instead of a dozen per ranking. False sends the batch through `_check_one`, which names
        the first break or puts ties in order, so the answer never differs, only its cost."""
        indices, scores = [], []
        for ranked in rankings:
            if not isinstance(ranked, Ranked):
                return False
            idx, sc = ranked.indices, ranked.scores
            if not (
                isinstance(idx, np.ndarray)
                and idx.ndim == 1
                and idx.dtype.kind in "iu"
                and isinstance(sc, np.ndarray)
                and sc.shape == idx.shape
            ):
                return False
            indices.append(idx)
            scores.append(sc)
        lengths = np.fromiter(map(len, indices), dtype=np.int64, count=len(indices))
        if not lengths.size or not lengths.sum():
            return True
        if asked is not None and int(lengths.max()) > asked:
            return False
        flat = np.concatenate(indices).astype(np.int64, copy=False)
        if int(flat.min()) < 0 or int(flat.max()) >= self.n:
            return False
        values = np.concatenate(scores).astype(np.float64, copy=False)
        if not np.isfinite(values).all():
            return False
        segment = np.repeat(np.arange(len(indices)), lengths)
        keys = np.sort(segment * self.n + flat)
        if (keys[1:] == keys[:-1]).any():  # a passage twice in one ranking
            return False
        same = segment[1:] == segment[:-1]
        if ((values[1:] > values[:-1]) & same).any():  # a score rising down a ranking
            return False
        order = self.tie_break.id_order[flat]
        if ((values[1:] == values[:-1]) & (order[1:] > order[:-1]) & same).any():
            return False  # ties to put in order
        if masks is not None:
            for idx, mask in zip(indices, masks, strict=True):
                if mask is not None and len(idx) and not mask[idx].all():
                    return False
        return True

    def _check_one(
        self,
        what: str,
        qid: str,
        ranked: object,
        asked: int | None,
        mask: np.ndarray | None,
        given: np.ndarray | None,
    ) -> Ranked:
        """`ranked` if it keeps the contract (its ties put in the project's order), else a
        ContractError naming `what`, the query and the offending value."""
        where = f"{what}, query {qid}"
        if not isinstance(ranked, Ranked):
            raise ContractError(f"{where}: returned {type(ranked).__name__}, not a Ranked")
        indices, scores = ranked.indices, ranked.scores
        if not isinstance(indices, np.ndarray) or indices.ndim != 1:
            raise ContractError(f"{where}: indices must be a 1-d numpy array of passage indices")
        if not np.issubdtype(indices.dtype, np.integer):
            raise ContractError(
                f"{where}: indices are {indices.dtype}, not integers (passage positions)"
            )
        if not isinstance(scores, np.ndarray) or scores.shape != indices.shape:
            raise ContractError(
                f"{where}: scores must be a numpy array as long as indices ({len(indices)})"
            )
        if not len(indices):
            return ranked
        bad = np.flatnonzero((indices < 0) | (indices >= self.n))
        if len(bad):
            raise ContractError(
                f"{where}: index {int(indices[bad[0]])} at rank {int(bad[0]) + 1} is out of "
                f"range (the corpus has {self.n} passages, indices 0..{self.n - 1})"
            )
        if asked is not None and len(indices) > asked:
            raise ContractError(
                f"{where}: returned {len(indices)} passages, more than the {asked} asked for"
            )
        ordered = np.sort(indices)
        twice = np.flatnonzero(ordered[1:] == ordered[:-1])
        if len(twice):
            index = int(ordered[twice[0]])
            raise ContractError(
                f"{where}: passage {self.ids[index]!r} (index {index}) appears twice"
            )
        values = np.asarray(scores, dtype=np.float64)
        unfinite = np.flatnonzero(~np.isfinite(values))
        if len(unfinite):
            rank = int(unfinite[0])
            raise ContractError(
                f"{where}: score {float(values[rank])!r} at rank {rank + 1} (passage "
                f"{self.ids[int(indices[rank])]!r}) is not a finite number"
            )
        rising = np.flatnonzero(values[1:] > values[:-1])
        if len(rising):
            rank = int(rising[0]) + 1
            raise ContractError(
                f"{where}: not best first: rank {rank + 1} (passage "
                f"{self.ids[int(indices[rank])]!r}) scores {float(values[rank])!r}, above "
                f"rank {rank}'s {float(values[rank - 1])!r}"
            )
        if mask is not None:
            excluded = np.flatnonzero(~mask[indices])
            if len(excluded) and given is not None:
                excluded = excluded[~np.isin(indices[excluded], given)]
            if len(excluded):
                rank = int(excluded[0])
                raise ContractError(
                    f"{where}: passage {self.ids[int(indices[rank])]!r} at rank {rank + 1} is "
                    "excluded by the query's filter, which the pipeline gives every arm as "
                    "`allowed` (an arm that filters by its own access rules declares "
                    "applies_own_acl = True)"
                )
        order = self.tie_break.id_order[indices]
        if np.any((values[1:] == values[:-1]) & (order[1:] > order[:-1])):
            canonical = np.lexsort((-order, -values))
            return Ranked(
                indices[canonical], scores[canonical], ranked.requested, ranked.empty_reason
            )
        return ranked
