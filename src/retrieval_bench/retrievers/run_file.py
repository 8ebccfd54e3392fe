"""A TREC run from any system as an arm (`retriever=run_file arms.run_file.path=RUN`), so another
system's rankings are scored, fused and compared like the built-in arms.

The run is read once with the project's TREC reader (`data.trec.read_run`: malformed lines fail
with file:line; the rank column is ignored and each query re-sorted as trec_eval does). What a
run from elsewhere gets wrong is counted, never silently dropped: `info()["bad_input"]` (the
manifest's `arms.<name>`, with examples) and report.md's "Arm input" line say how many

- `unknown_ids`: lines whose docid is not a passage of the corpus (left out of the ranking);
- `duplicates`: repeats of a (qid, docid) pair (the first line's score is kept);
- `queries_not_in_evalset`: run queries the evaluation set does not hold (never asked);
- `queries_not_in_run`: evaluation queries the run has no line for: their ranking is empty with
  `empty_reason` `not_in_run` (scored 0, as trec_eval -c does), and
  `queries_without_known_ids` those whose every docid is unknown (`no_known_ids`).

A run that gives the arm nothing to rank is refused (`NothingUsable`, exit 2, naming the arm
and the file) rather than scored as zeros: one that holds no line, none of whose query ids is
one of the evaluation set, or none of whose ids for those queries is a passage of the corpus
(a run of another collection, or a `scoring.unit=doc` export of documents fed back as passages).

Filters: the run is the other system's whole candidate list for the query, so applying a
query's `allowed` mask to that list and then cutting to k is exact (it is the same as ranking
the allowed passages only); what the run does not hold cannot be recovered by any filter.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from retrieval_bench.config.run_file import RunFileConfig, check_run_path
from retrieval_bench.data.trec import read_run
from retrieval_bench.errors import NothingUsable
from retrieval_bench.paths import resolve_path
from retrieval_bench.protocols import BuildContext
from retrieval_bench.records import FILTERED_OUT, EvalQuery, Ranked
from retrieval_bench.tiebreak import TieBreak

log = logging.getLogger(__name__)

# Why a run_file arm's ranking is empty (`Ranked.empty_reason`).
NOT_IN_RUN = "not_in_run"
NO_KNOWN_IDS = "no_known_ids"
# How many examples of each bad-input kind the manifest lists.
EXAMPLES = 5


@dataclass
class RunFileArmSpec(RunFileConfig):
    """`arms.<name>: {_target_: retrieval_bench.retrievers.run_file.RunFileArmSpec, path: RUN}`:
    two nodes with two paths run, and are fused, as two arms."""

    def check(self, name: str, ctx: BuildContext) -> None:
        """Before any arm builds: the run file exists (ConfigError naming its key)."""
        check_run_path(self.path, f"arms.{name}.path")

    def build(self, name: str, ctx: BuildContext) -> RunFileArm:
        check_run_path(self.path, f"arms.{name}.path")
        return RunFileArm.read(resolve_path(self.path), ctx, name)


class RunFileArm:
    """A run's rankings, as passage indices, answered per query id."""

    def __init__(
        self,
        path: Path,
        rankings: Mapping[str, tuple[np.ndarray, np.ndarray]],
        tie_break: TieBreak,
        counts: dict[str, Any],
    ) -> None:
        self.path = path
        self.rankings = rankings
        self.tie_break = tie_break
        self.counts = counts

    @classmethod
    def read(cls, path: Path, ctx: BuildContext, name: str = "run_file") -> RunFileArm:
        """Read and check `path` against the corpus and the evaluation set of `ctx`; a run
        that gives the arm `name` nothing to rank is refused (`_check_usable`)."""
        duplicates: list[tuple[str, str, int]] = []
        run = read_run(path, duplicates)
        _check_usable(name, path, run, ctx)
        positions = ctx.positions
        rankings: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        unknown: list[str] = []
        without_known: list[str] = []
        for qid, pairs in run.items():
            known = [(positions[doc], score) for doc, score in pairs if doc in positions]
            unknown.extend(f"{qid} {doc}" for doc, _ in pairs if doc not in positions)
            if not known:
                without_known.append(qid)
            rankings[qid] = (
                np.fromiter((i for i, _ in known), dtype=np.int64, count=len(known)),
                np.fromiter((s for _, s in known), dtype=np.float64, count=len(known)),
            )
        evalset = [q.query_id for q in ctx.queries]
        asked = set(evalset)
        not_in_evalset = [qid for qid in run if qid not in asked]
        not_in_run = [qid for qid in evalset if qid not in run]
        counts: dict[str, Any] = {
            "kind": "run_file",
            "path": str(path),
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            "lines": sum(map(len, run.values())) + len(duplicates),
            "queries": len(run),
            # What the report lists for every arm that reads outside input (`bad_input`).
            "bad_input": {
                "unknown_ids": len(unknown),
                "duplicates": len(duplicates),
                "queries_not_in_evalset": len(not_in_evalset),
                "queries_not_in_run": len(not_in_run),
                "queries_without_known_ids": len([q for q in without_known if q in asked]),
            },
            "examples": {
                "unknown_ids": unknown[:EXAMPLES],
                "duplicates": [f"{path}:{line} {q} {d}" for q, d, line in duplicates[:EXAMPLES]],
                "queries_not_in_evalset": not_in_evalset[:EXAMPLES],
                "queries_not_in_run": not_in_run[:EXAMPLES],
            },
        }
        problems = {name: n for name, n in counts["bad_input"].items() if n}
        if problems:
            log.warning(
                "run file %s: %s", path, ", ".join(f"{name} {n}" for name, n in problems.items())
            )
        return cls(path, rankings, ctx.tie_break, counts)

    def search(
        self, queries: Sequence[EvalQuery], k: int, allowed: Sequence[np.ndarray | None]
    ) -> list[Ranked]:
        """Each query's run entries within its mask, cut to k in the project's order (score
        descending, then id descending: trec_eval's), so a run fed back scores as it did."""
        out = []
        for query, mask in zip(queries, allowed, strict=True):
            entry = self.rankings.get(query.query_id)
            if entry is None:
                out.append(_empty(k, NOT_IN_RUN))
                continue
            indices, scores = entry
            if not len(indices):
                out.append(_empty(k, NO_KNOWN_IDS))
                continue
            if mask is not None:
                keep = mask[indices]
                indices, scores = indices[keep], scores[keep]
                if not len(indices):
                    out.append(_empty(k, FILTERED_OUT))
                    continue
            top, top_scores = self.tie_break.top(indices, scores, k)
            out.append(Ranked(top, top_scores, k))
        return out

    def info(self) -> dict[str, Any]:
        return self.counts


def _check_usable(
    name: str, path: Path, run: Mapping[str, Sequence[tuple[str, float]]], ctx: BuildContext
) -> None:
    """NothingUsable naming the arm and the file when the run holds no line, none of its
    queries is one of the evaluation set, or none of its ids for those queries is a passage of
    the corpus: every ranking would be empty and score 0, which is no measurement."""
    where = f"arm {name!r}: run file {path}"
    if not run:
        raise NothingUsable(f"{where} holds no run line: the arm has nothing to rank")
    asked = {q.query_id for q in ctx.queries}
    ours = [qid for qid in run if qid in asked]
    if not ours:
        raise NothingUsable(
            f"{where}: none of its {len(run)} query ids is a query of the evaluation set "
            f"(run: {_examples(run)}; evaluation set: {_examples(sorted(asked))}): "
            "a run of another evaluation set?"
        )
    if not any(doc in ctx.positions for qid in ours for doc, _ in run[qid]):
        docs = {doc for qid in ours for doc, _ in run[qid]}
        raise NothingUsable(
            f"{where}: none of the {len(docs)} ids it gives the evaluation set's queries is a "
            f"passage of the corpus (e.g. {_examples(sorted(docs))}): a run of another corpus, "
            "or of documents (a scoring.unit=doc export) where the arm ranks passages?"
        )


def _examples(ids: Iterable[str], n: int = 3) -> str:
    """The first `n` of `ids`, quoted, for a message."""
    shown = list(itertools.islice(ids, n))
    return ", ".join(repr(i) for i in shown)


def _empty(k: int, reason: str) -> Ranked:
    return Ranked(np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64), k, reason)
