"""What one ranked item is when scoring (`scoring.unit`): a passage, or the document it was cut
from, for evaluation sets labelled by document while the corpus is chunked.

With `scoring.unit=doc`:

- a ranking of passages becomes a ranking of their documents (`doc_id`; a passage without one
  is its own document), each document once, at its first (best-ranked) passage's score. Ties
  between documents then follow the project's order (score descending, then id descending),
  so a document-level TREC export scores in trec_eval exactly as in metrics.json;
- a label naming a passage counts for that passage's document, any other label id is read as a
  document id; a document's grade is the highest grade among its labels (one relevant passage
  makes the document relevant; a document judged 0 through one passage and 2 through another
  is 2). A label id that is neither a passage nor a document of the corpus excludes the query
  as `gold_missing_from_corpus`, as it does at passage level.

Scoring still reads recorded rankings only: the passage -> document map is the one lookup it
needs, built once per job from the corpus.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from retrieval_bench.config.schema import PASSAGE
from retrieval_bench.data.trec import trec_order
from retrieval_bench.records import EvalQuery, Passage, UnjudgedQuery
from retrieval_bench.scoring.labels import Judgements, judge


def passage_docs(passages: Sequence[Passage]) -> dict[str, str]:
    """Passage id -> its document id (the passage's own id when it has no `doc_id`)."""
    return {p.id: p.doc_id or p.id for p in passages}


def doc_ranking(
    ids: Sequence[str], scores: Sequence[float], doc_of: Mapping[str, str]
) -> tuple[list[str], list[float]]:
    """A passage ranking as a document ranking: each document at its first passage's score,
    in trec_eval's order (see the module docstring)."""
    best: dict[str, float] = {}
    for pid, score in zip(ids, scores, strict=True):
        best.setdefault(doc_of.get(pid, pid), float(score))
    ordered = trec_order(best.items())
    return [doc for doc, _ in ordered], [score for _, score in ordered]


def doc_labels(labels: Mapping[str, int], doc_of: Mapping[str, str]) -> dict[str, int]:
    """One query's graded labels per document: the highest grade among its labels."""
    out: dict[str, int] = {}
    for label_id, grade in labels.items():
        doc = doc_of.get(label_id, label_id)
        out[doc] = max(grade, out.get(doc, grade))
    return out


def judge_in_unit(
    unit: str,
    queries: Sequence[EvalQuery],
    passages: Sequence[Passage],
    unjudged: Sequence[UnjudgedQuery] = (),
) -> Judgements:
    """`labels.judge` against the corpus, with the labels read in `unit`."""
    if unit == PASSAGE:
        return judge(queries, {p.id for p in passages}, unjudged)
    doc_of = passage_docs(passages)
    judgements = judge(queries, {*doc_of, *doc_of.values()}, unjudged)
    judgements.qrels = {qid: doc_labels(labels, doc_of) for qid, labels in judgements.qrels.items()}
    return judgements
