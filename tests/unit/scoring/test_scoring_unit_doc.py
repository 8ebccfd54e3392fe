"""scoring.unit=doc: passage rankings scored as their documents' rankings against labels read by
document, on a hand-made chunked corpus where the two units give different numbers. Expected
values are worked out by hand below, then cross-checked with pytrec_eval on the converted run
and qrels."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import pytrec_eval
from conftest import compose_config, run_in_process

from retrieval_bench.data.trec import read_qrels, read_run
from retrieval_bench.errors import ConfigError
from retrieval_bench.io.strict_json import jsonl_text
from retrieval_bench.records import (
    EvalQuery,
    FilterDecision,
    ParsedQuery,
    Passage,
    QueryRecord,
    StageRecord,
)
from retrieval_bench.scoring.labels import GOLD_MISSING
from retrieval_bench.scoring.records import score_records
from retrieval_bench.scoring.units import doc_labels, doc_ranking, judge_in_unit, passage_docs

# Documents A (a1..a3), B (b1, b2), C (c1); `solo` has no doc_id: it is its own document.
PASSAGES = [
    *(Passage(f"a{i}", "t", doc_id="A") for i in (1, 2, 3)),
    *(Passage(f"b{i}", "t", doc_id="B") for i in (1, 2)),
    Passage("c1", "t", doc_id="C"),
    Passage("solo", "t"),
]
QUERIES = [
    # Labelled by passage: a2 (grade 1) and b1 (grade 2) -> A:1, B:2.
    EvalQuery("q1", "x", "t", "reviewed", {"a2": 1, "b1": 2}),
    # Labelled by document C, and by the passage `solo` (its own document).
    EvalQuery("q2", "x", "t", "reviewed", {"C": 1, "solo": 1}),
    # Two passages of A with grades 2 and 1: A is graded 2 (the highest).
    EvalQuery("q3", "x", "t", "reviewed", {"a1": 2, "a3": 1}),
]
RANKINGS = {
    "q1": ["a1", "a3", "c1", "b2", "a2", "b1"],  # documents: A, C, B
    "q2": ["solo", "a1", "c1"],  # documents: solo, A, C
    "q3": ["b1", "a3", "a1"],  # documents: B, A
}
CUTOFFS = [2, 3]


def _records() -> list[QueryRecord]:
    out = []
    for query in QUERIES:
        ids = RANKINGS[query.query_id]
        scores = [1.0 - 0.1 * i for i in range(len(ids))]
        stage = StageRecord(ids, scores, 10, len(ids))
        out.append(
            QueryRecord(query, None, "s", ParsedQuery(), FilterDecision(None, ()), {"final": stage})
        )
    return out


def _score(unit: str) -> dict[str, object]:
    judgements = judge_in_unit(unit, QUERIES, PASSAGES)
    doc_of = passage_docs(PASSAGES) if unit == "doc" else None
    return score_records(_records(), judgements, CUTOFFS, doc_of=doc_of)


def test_rankings_become_documents_at_their_first_passage() -> None:
    doc_of = passage_docs(PASSAGES)
    assert doc_ranking(RANKINGS["q1"], [6, 5, 4, 3, 2, 1], doc_of) == (
        ["A", "C", "B"],
        [6.0, 4.0, 3.0],
    )
    # Tied documents follow the project's order (id descending), as trec_eval would sort them.
    assert doc_ranking(["b1", "a1", "c1"], [1, 1, 1], doc_of) == (["C", "B", "A"], [1.0] * 3)


def test_a_document_takes_the_highest_grade_of_its_labels() -> None:
    doc_of = passage_docs(PASSAGES)
    assert doc_labels({"a1": 0, "a2": 2, "a3": 1, "b1": 0}, doc_of) == {"A": 2, "B": 0}
    assert doc_labels({"C": 1, "solo": 1}, doc_of) == {"C": 1, "solo": 1}


def test_doc_metrics_match_the_hand_computed_values() -> None:
    stage = _score("doc")["stages"]["final"]  # type: ignore[index]
    _check_hand_values(stage)


LOG3 = math.log2(3)
EXPECTED = {
    # q1: A(1), C, B(2); ideal B(2), A(1).
    "q1": {"recall@2": 0.5, "recall@3": 1.0, "mrr@3": 1.0, "ndcg@3": 2 / (2 + 1 / LOG3)},
    # q2: solo(1), A, C(1); ideal solo, C.
    "q2": {"recall@2": 0.5, "recall@3": 1.0, "mrr@3": 1.0, "ndcg@3": 1.5 / (1 + 1 / LOG3)},
    # q3: B, A(2); one relevant document, found at rank 2.
    "q3": {"recall@2": 1.0, "recall@3": 1.0, "mrr@3": 0.5, "ndcg@3": (2 / LOG3) / 2},
}


def _check_hand_values(stage: dict) -> None:
    per_query = stage["per_query"]
    for qid, values in EXPECTED.items():
        for name, value in values.items():
            assert per_query[qid][name] == pytest.approx(value, abs=1e-12), (qid, name)
    assert stage["overall"]["recall@2"] == pytest.approx(2 / 3, abs=1e-12)
    assert stage["overall"]["recall@3"] == 1.0
    assert stage["overall"]["mrr@3"] == pytest.approx(2.5 / 3, abs=1e-12)
    assert stage["counts"]["scored"] == 3


def test_the_passage_unit_scores_the_same_rankings_differently() -> None:
    passage = _score("passage")
    assert passage["unit"] == "passage"
    stage = passage["stages"]["final"]  # type: ignore[index]
    # q2's label C names no passage: excluded, as a label missing from the corpus is.
    assert stage["excluded_queries"] == {"q2": GOLD_MISSING}
    assert stage["per_query"]["q1"]["recall@3"] == 0.0  # a2, b1 ranked 5th and 6th
    assert stage["per_query"]["q3"]["recall@2"] == 0.5  # a3 at 2, a1 at 3
    assert stage["overall"]["recall@3"] == 0.5
    assert _score("doc")["unit"] == "doc"


def test_doc_metrics_equal_pytrec_eval_on_the_converted_run_and_qrels() -> None:
    judgements = judge_in_unit("doc", QUERIES, PASSAGES)
    doc_of = passage_docs(PASSAGES)
    run = {}
    for record in _records():
        stage = record.stages["final"]
        ids, scores = doc_ranking(stage.ids, stage.scores, doc_of)
        run[record.query.query_id] = dict(zip(ids, scores, strict=True))
    measures = {"recall_2", "recall_3", "ndcg_cut_3", "P_3"}
    theirs = pytrec_eval.RelevanceEvaluator(judgements.qrels, measures).evaluate(run)
    ours = _score("doc")["stages"]["final"]["per_query"]  # type: ignore[index]
    names = {"recall_2": "recall@2", "recall_3": "recall@3", "ndcg_cut_3": "ndcg@3"}
    names["P_3"] = "precision@3"
    for qid, values in theirs.items():
        for trec_name, name in names.items():
            assert ours[qid][name] == pytest.approx(values[trec_name], abs=1e-12), (qid, name)
    assert sorted(theirs) == ["q1", "q2", "q3"]
    assert np.isclose(theirs["q1"]["ndcg_cut_3"], 2 / (2 + 1 / math.log2(3)))


def test_a_label_that_is_neither_passage_nor_document_excludes_the_query() -> None:
    query = EvalQuery("q9", "x", "t", "reviewed", {"Z": 1})
    judgements = judge_in_unit("doc", [query], PASSAGES)
    assert judgements.excluded == {"q9": GOLD_MISSING}
    assert judgements.missing_gold == {"q9": ["Z"]}


def test_a_unit_typo_is_refused_with_the_nearest_unit() -> None:
    with pytest.raises(
        ConfigError, match=r"'scoring\.unit': unknown unit 'docs'; did you mean 'doc'"
    ):
        compose_config(["scoring.unit=docs"])
    assert compose_config(["scoring.unit=doc"]).scoring.unit == "doc"


def test_group_by_passage_metadata_is_refused_at_document_unit() -> None:
    with pytest.raises(ConfigError, match=r"'scoring\.group_by': 'meta\.city' groups by"):
        compose_config(["scoring.unit=doc", "scoring.group_by=[meta.city]"])
    compose_config(["scoring.unit=doc", "scoring.group_by=[user_role]"])


TEXTS = {
    "a1": "harbour ferry timetable",
    "a2": "harbour ferry tickets price",
    "a3": "harbour ferry pier",
    "b1": "ferry tickets online booking",
    "b2": "online booking refund",
    "c1": "tickets for the museum",
    "solo": "museum ferry tickets",
}


def write_dataset(folder: Path) -> list[str]:
    """The corpus and evaluation set above as a native dataset; the overrides that select it."""
    corpus = folder / "corpus"
    corpus.mkdir(parents=True)
    passages = [
        {"id": p.id, "text": TEXTS[p.id], **({"doc_id": p.doc_id} if p.doc_id else {})}
        for p in PASSAGES
    ]
    (corpus / "passages.jsonl").write_text(jsonl_text(passages), encoding="utf-8")
    queries = [
        {
            "query_id": q.query_id,
            "query": "harbour ferry tickets" if q.query_id != "q2" else "museum tickets",
            "query_type": q.query_type,
            "label_status": q.label_status,
            "relevant_ids": [],
            "relevance": q.relevance,
        }
        for q in QUERIES
    ]
    (folder / "evalset.jsonl").write_text(jsonl_text(queries), encoding="utf-8")
    return [
        "dataset.name=chunked",
        f"dataset.corpus={corpus}",
        f"dataset.evalset={folder / 'evalset.jsonl'}",
        f"cache_dir={folder / 'cache'}",
        "top_k=3",
    ]


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_a_doc_job_writes_what_it_scored_and_says_so(tmp_path: Path) -> None:
    """metrics.json, manifest and report name the unit; trec/ and qrels.trec hold documents,
    and pytrec_eval on them gives metrics.json's numbers; rankings.jsonl keeps passages."""
    overrides = [*write_dataset(tmp_path), "retriever=bm25", "scoring.unit=doc"]
    _, job = run_in_process(overrides, tmp_path)
    metrics = json.loads((job / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["unit"] == "doc"
    assert json.loads((job / "manifest.json").read_text(encoding="utf-8"))["scoring_unit"] == "doc"
    assert "Scored unit: **document** (`scoring.unit=doc`)" in (job / "report.md").read_text(
        encoding="utf-8"
    )
    qrels = read_qrels(job / "qrels.trec")
    assert qrels == {"q1": {"A": 1, "B": 2}, "q2": {"C": 1, "solo": 1}, "q3": {"A": 2}}
    passages = {
        line["query_id"]: line["stages"]["final"]["ids"]
        for line in map(json.loads, (job / "rankings.jsonl").read_text().splitlines())
    }
    doc_of = passage_docs(PASSAGES)
    for stage in ("bm25", "final"):
        run = read_run(job / "trec" / f"{stage}.run")
        assert set(run) == {"q1", "q2", "q3"}
        if stage == "final":
            for qid, pairs in run.items():
                docs = list(dict.fromkeys(doc_of[pid] for pid in passages[qid]))
                assert sorted(doc for doc, _ in pairs) == sorted(docs)
        theirs = pytrec_eval.RelevanceEvaluator(qrels, {"recall_3", "ndcg_cut_3"}).evaluate(
            {qid: dict(pairs) for qid, pairs in run.items()}
        )
        ours = metrics["stages"][stage]["per_query"]
        for qid, values in theirs.items():
            assert ours[qid]["recall@3"] == pytest.approx(values["recall_3"], abs=1e-12)
            assert ours[qid]["ndcg@3"] == pytest.approx(values["ndcg_cut_3"], abs=1e-12)
    assert "families" not in metrics["stages"]["final"]


def test_a_passage_job_says_passage(tmp_path: Path) -> None:
    _, job = run_in_process([*write_dataset(tmp_path), "retriever=bm25"], tmp_path)
    assert json.loads((job / "metrics.json").read_text(encoding="utf-8"))["unit"] == "passage"
    assert "Scored unit: **passage**." in (job / "report.md").read_text(encoding="utf-8")


def test_a_doc_job_over_a_hand_made_run_gives_the_hand_computed_values(tmp_path: Path) -> None:
    """The same rankings through a whole job (as a run_file arm) and scoring.unit=doc."""
    run = tmp_path / "hand.run"
    run.write_text(
        "".join(
            f"{qid} Q0 {pid} {rank} {1.0 - 0.1 * rank} hand\n"
            for qid, ids in RANKINGS.items()
            for rank, pid in enumerate(ids)
        ),
        encoding="utf-8",
    )
    overrides = [
        *write_dataset(tmp_path),
        "retriever=run_file",
        f"arms.run_file.path={run}",
        "scoring.unit=doc",
        "scoring.cutoffs=[2]",
    ]
    _, job = run_in_process(overrides, tmp_path)
    metrics = json.loads((job / "metrics.json").read_text(encoding="utf-8"))
    # The arm keeps the whole run (pool_size 10): its documents are the hand-worked ones.
    _check_hand_values(metrics["stages"]["run_file"])
