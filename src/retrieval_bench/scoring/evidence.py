"""Evidence: is the whole chain of passages an answer needs in the top K?

A query's evidence is a chain of hops; each hop is a group of passage ids any one of which
serves that step (the evaluation set's `hops`). A query without `hops` is a 1-hop chain whose
single hop accepts any of its relevant ids. Evidence is counted over what the asker may read
(`permissions.may_read`): an unreadable id is dropped from its hop, and a query with a hop left
empty has a chain no permission-respecting system can complete: it is excluded as
"unreadable_hop" (the policy set's `permission` queries, which belong to refusal; refusal
itself decides answerability on relevant passages, not on chains). A hop id
missing from the corpus excludes the query as "gold_missing_from_corpus", as a relevant id does.

Per query, at each cut-off K (rank r is 1-based; a hop is served at the best rank of its ids):

- `hops_found@K`      hops with at least one of their ids in the top K
- `hop_recall@K`      hops_found@K / number of hops; `hop_recall_pooled@K` = sum / sum
- `evidence_chain@K`  1 if every hop is served: the answer's full chain is in the top K
- `evidence_all@K`    1 if every evidence id of every hop is in the top K ("all of several ids
                      required": stricter than the chain when a hop offers alternatives)
- `evidence_any@K`    1 if any evidence id is in the top K ("any one of them")

so evidence_all <= evidence_chain <= evidence_any; for a 1-hop chain evidence_chain and
evidence_any equal readable_hit@K, and evidence_all equals readable_all_hit@K.

Completeness curves (`curves` in the family's result): for every depth k = 1..max cut-off, per
hop count, the share of queries whose chain is complete (evidence_chain@k) and the mean
hop_recall@k, so 1-hop, 2-hop and 3-hop chains can be compared at every depth. The family also
breaks its metrics down `by_hops` (the hop count). Label states as for the doc metrics: only
queries the doc metrics score are candidates (the same exclusions, with their reasons).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np

from retrieval_bench.records import EvalQuery
from retrieval_bench.scoring.aggregate import MISSING_GROUP, check_cutoffs, names_at, summarise
from retrieval_bench.scoring.labels import GOLD_MISSING, NOT_IN_RUN, Judgements
from retrieval_bench.scoring.permissions import Acl, may_read
from retrieval_bench.scoring.registry import pooled_columns, reported

UNREADABLE_HOP = "unreadable_hop"
HOPS_FIELD = "hops"

Chain = tuple[tuple[str, ...], ...]


def evidence_chain_of(query: EvalQuery, relevant: Collection[str]) -> Chain:
    """The query's hops, or one hop of its relevant ids when it has none."""
    if query.hops:
        return tuple(tuple(hop) for hop in query.hops)
    return (tuple(relevant),) if relevant else ()


def hop_ranks(rankings: Sequence[Sequence[str]], chains: Sequence[Chain]) -> dict[str, np.ndarray]:
    """Per query and hop, the 1-based rank at which the hop is first served (inf if never),
    padded to the longest chain; plus the rank at which every evidence id has appeared.

    Returns `hop_rank` (n, H) float, `has_hop` (n, H) bool, `all_rank` (n,) float."""
    n = len(chains)
    width = max((len(c) for c in chains), default=0)
    hop_rank = np.full((n, max(width, 1)), np.inf)
    has_hop = np.zeros((n, max(width, 1)), dtype=bool)
    all_rank = np.full(n, np.inf)
    for i, (ranking, chain) in enumerate(zip(rankings, chains, strict=True)):
        position = {pid: r for r, pid in enumerate(ranking, start=1)}
        for h, hop in enumerate(chain):
            has_hop[i, h] = True
            hop_rank[i, h] = min((position.get(pid, np.inf) for pid in hop), default=np.inf)
        ids = {pid for hop in chain for pid in hop}
        all_rank[i] = max((position.get(pid, np.inf) for pid in ids), default=np.inf)
    return {"hop_rank": hop_rank, "has_hop": has_hop, "all_rank": all_rank}


def hops_found(ranks: Mapping[str, np.ndarray], k: int) -> np.ndarray:
    """Hops served within the top k."""
    return np.count_nonzero((ranks["hop_rank"] <= k) & ranks["has_hop"], axis=1)


def hop_recall(ranks: Mapping[str, np.ndarray], k: int) -> np.ndarray:
    """Share of the chain's hops served within the top k."""
    return hops_found(ranks, k) / ranks["has_hop"].sum(axis=1)


def evidence_chain(ranks: Mapping[str, np.ndarray], k: int) -> np.ndarray:
    """1.0 when every hop is served within the top k."""
    return (hops_found(ranks, k) == ranks["has_hop"].sum(axis=1)).astype(np.float64)


def evidence_all(ranks: Mapping[str, np.ndarray], k: int) -> np.ndarray:
    """1.0 when every evidence id of every hop is within the top k."""
    return (ranks["all_rank"] <= k).astype(np.float64)


def evidence_any(ranks: Mapping[str, np.ndarray], k: int) -> np.ndarray:
    """1.0 when any evidence id is within the top k."""
    return (hops_found(ranks, k) > 0).astype(np.float64)


def evidence_names(cutoffs: Sequence[int]) -> list[str]:
    return names_at(reported("evidence"), cutoffs)


def completeness_curves(
    ranks: Mapping[str, np.ndarray], depth: int, hop_counts: np.ndarray
) -> dict[str, Any]:
    """evidence_chain@k and hop_recall@k for k = 1..depth, per hop count (macro means)."""
    ks = list(range(1, depth + 1))
    chain_rank = np.where(ranks["has_hop"], ranks["hop_rank"], 0).max(axis=1)  # inf if a hop unmet
    out: dict[str, Any] = {"k": ks, "by_hops": {}}
    for count in sorted(set(hop_counts.tolist())):
        rows = hop_counts == count
        sub = {name: value[rows] for name, value in ranks.items()}
        out["by_hops"][str(count)] = {
            "n": int(rows.sum()),
            "evidence_chain": [float(np.mean(chain_rank[rows] <= k)) for k in ks],
            "hop_recall": [float(np.mean(hop_recall(sub, k))) for k in ks],
        }
    return out


def score_evidence(
    rankings: Mapping[str, Sequence[str]],
    judgements: Judgements,
    queries: Mapping[str, EvalQuery],
    acl: Mapping[str, Acl],
    cutoffs: Sequence[int],
    corpus_ids: Collection[str] | None = None,
    group_by: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, Any]:
    """Family `evidence` (definitions in the module docstring), with `curves` and `by_hops`."""
    ks = check_cutoffs(cutoffs)
    excluded = dict(judgements.excluded)
    scored: list[str] = []
    chains: list[Chain] = []
    hop_count: dict[str, str] = {}
    for qid, labels in judgements.qrels.items():
        query = queries.get(qid)
        relevant = [pid for pid, grade in labels.items() if grade > 0]
        chain = evidence_chain_of(query, relevant) if query else (tuple(relevant),)
        hop_count[qid] = str(len(chain))
        role = query.user_role if query else None
        readable = tuple(tuple(p for p in hop if may_read(role, acl.get(p))) for hop in chain)
        if corpus_ids is not None and any(p not in corpus_ids for hop in chain for p in hop):
            excluded[qid] = GOLD_MISSING
        elif not all(readable):
            excluded[qid] = UNREADABLE_HOP
        elif qid not in rankings:
            excluded[qid] = NOT_IN_RUN
        else:
            scored.append(qid)
            chains.append(readable)
    for qid, query in queries.items():  # the unscored ones, for their exclusion counts
        if qid not in hop_count and (chain := evidence_chain_of(query, query.relevant_ids)):
            hop_count[qid] = str(len(chain))
    ranks = hop_ranks([rankings[q] for q in scored], chains)
    columns: dict[str, np.ndarray] = {"n_hops": ranks["has_hop"].sum(axis=1)}
    for k in ks:
        columns[f"hops_found@{k}"] = hops_found(ranks, k)
        columns[f"hop_recall@{k}"] = hop_recall(ranks, k) if scored else np.zeros(0)
        columns[f"evidence_chain@{k}"] = evidence_chain(ranks, k)
        columns[f"evidence_all@{k}"] = evidence_all(ranks, k)
        columns[f"evidence_any@{k}"] = evidence_any(ranks, k)
    pooled = pooled_columns("evidence", ks)
    fields = {HOPS_FIELD: {q: hop_count.get(q, MISSING_GROUP) for q in judgements.query_types}}
    result = summarise(
        columns,
        scored,
        judgements.query_types,
        excluded,
        evidence_names(ks),
        pooled,
        {**fields, **(group_by or {})},
    )
    result["curves"] = completeness_curves(ranks, max(ks), columns["n_hops"])
    return result
