"""Record typos never pass silently: an unknown field of an evaluation set, a passage, a
lexicon entry or a BEIR record is refused naming its file, its line and the nearest field;
free-form `meta` and `notes` stay allowed; BEIR queries the split's qrels do not judge are
counted, not dropped."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import run_app, shared_benchmark
from support.datasets import make_beir, write_jsonl

from retrieval_bench.data.beir import load_beir
from retrieval_bench.data.evalset import load_evalset
from retrieval_bench.data.passages import load_lexicon, load_passages
from retrieval_bench.errors import DataError
from retrieval_bench.records import UnjudgedQuery
from retrieval_bench.scoring.labels import judge

# --- record fields -------------------------------------------------------------------------

QUERY = {
    "query_id": "q1",
    "query": "日月湾冲浪",
    "query_type": "entity_exact",
    "label_status": "reviewed",
    "relevant_ids": ["a"],
}


def test_a_misspelt_evalset_field_names_file_line_and_nearest(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "e.jsonl",
        [QUERY, {**QUERY, "query_id": "q2", "expected_entites": ["日月湾"]}],
    )
    with pytest.raises(DataError) as caught:
        load_evalset(path)
    assert str(caught.value) == (
        f"{path}:2: unknown field 'expected_entites'; did you mean 'expected_entities'?"
    )


def test_free_form_meta_and_notes_stay_allowed(tmp_path: Path) -> None:
    evalset = write_jsonl(
        tmp_path / "e.jsonl", [{**QUERY, "notes": "checked", "meta": {"annotator": "x"}}]
    )
    assert load_evalset(evalset)[0].notes == "checked"
    passages = write_jsonl(
        tmp_path / "p.jsonl", [{"id": "a", "text": "x", "notes": "n", "meta": {"anything": 1}}]
    )
    assert load_passages(passages)[0].meta == {"anything": 1}


@pytest.mark.parametrize(
    ("name", "record", "field", "hint"),
    [
        ("p.jsonl", {"id": "a", "txt": "x"}, "txt", "did you mean 'text'?"),
        ("p.jsonl", {"id": "a", "text": "x", "docid": "d"}, "docid", "did you mean 'doc_id'?"),
        ("lexicon.jsonl", {"name": "甲", "alias": ["乙"]}, "alias", "did you mean 'aliases'?"),
        ("lexicon.jsonl", {"name": "甲", "zzz": 1}, "zzz", "known: name, aliases"),
    ],
)
def test_unknown_passage_and_lexicon_fields(
    tmp_path: Path, name: str, record: dict, field: str, hint: str
) -> None:
    path = write_jsonl(tmp_path / name, [record])
    loader = load_lexicon if name == "lexicon.jsonl" else load_passages
    with pytest.raises(DataError, match=re.escape(f"{path}:1: unknown field '{field}'; {hint}")):
        loader(path)


def test_unknown_beir_fields_name_file_and_line(tmp_path: Path) -> None:
    root = make_beir(tmp_path / "toy")
    with (root / "queries.jsonl").open("a") as handle:
        handle.write(json.dumps({"_id": "q4", "text": "x", "metdata": {}}) + "\n")
    with pytest.raises(DataError) as caught:
        load_beir(root)
    assert str(caught.value) == (
        f"{root / 'queries.jsonl'}:4: unknown field 'metdata'; did you mean 'metadata'?"
    )
    root = make_beir(tmp_path / "toy2")
    with (root / "corpus.jsonl").open("a") as handle:
        handle.write(json.dumps({"_id": "d4", "titel": "x", "text": "y"}) + "\n")
    with pytest.raises(DataError, match=re.escape("corpus.jsonl:4: unknown field 'titel'")):
        load_beir(root)


@pytest.mark.parametrize("name", ["scifact", "cmrc2018"])
def test_real_beir_sets_hold_only_known_fields(name: str) -> None:
    dataset = load_beir(shared_benchmark(name))
    assert dataset.unjudged == ()
    assert len(dataset.queries) == {"scifact": 300, "cmrc2018": 1000}[name]


# --- queries the labels do not judge -------------------------------------------------------


def test_beir_queries_without_qrels_are_counted_not_dropped(tmp_path: Path) -> None:
    root = make_beir(tmp_path / "toy")  # q3 is in queries.jsonl, in no qrels file
    with (root / "queries.jsonl").open("a") as handle:
        handle.write(json.dumps({"_id": "q4", "text": "train query"}) + "\n")
    (root / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\nq4\td1\t1\n")
    dataset = load_beir(root)
    assert [q.query_id for q in dataset.queries] == ["q1", "q2"]
    assert dataset.unjudged == (
        UnjudgedQuery("q3", "unknown", "no_qrels"),
        UnjudgedQuery("q4", "unknown", "other_split"),
    )
    judgements = judge(dataset.queries, {p.id for p in dataset.passages}, dataset.unjudged)
    assert set(judgements.qrels) == {"q1", "q2"}
    assert judgements.excluded == {"q3": "no_qrels", "q4": "other_split"}


@pytest.mark.slow
def test_app_reports_beir_queries_without_qrels(tmp_path: Path) -> None:
    root = make_beir(tmp_path / "toy")
    run_dir = tmp_path / "run"
    proc = run_app(
        [
            "dataset=beir",
            f"dataset.path={root}",
            "retriever=bm25",
            "top_k=3",
            f"cache_dir={tmp_path / 'cache'}",
            f"hydra.run.dir={run_dir}",
        ]
    )
    assert proc.returncode == 0, proc.stderr
    final = json.loads((run_dir / "metrics.json").read_text())["stages"]["final"]
    assert final["counts"]["scored"] == 2
    assert final["counts"]["excluded"] == {"no_qrels": 1}
    assert final["excluded_queries"] == {"q3": "no_qrels"}
    assert "excluded: no_qrels 1" in (run_dir / "report.md").read_text()
    ranked = [json.loads(line)["query_id"] for line in (run_dir / "rankings.jsonl").open()]
    assert ranked == ["q1", "q2"]
