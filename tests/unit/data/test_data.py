"""Dataset loading: every bad input names its file and line, BEIR folders load as they are."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FIXTURE, shared_benchmark
from support.datasets import make_beir, write_jsonl

from retrieval_bench.data.beir import load_beir
from retrieval_bench.data.evalset import load_evalset
from retrieval_bench.data.loader import load_native
from retrieval_bench.data.passages import load_lexicon, load_passages
from retrieval_bench.errors import DataError


def test_fixture_loads_with_lexicon_and_hashes() -> None:
    dataset = load_native("mini", FIXTURE / "corpus" / "mini", FIXTURE / "evalsets" / "mini.jsonl")
    assert len(dataset.passages) == 12 and len(dataset.queries) == 9
    assert {e.name for e in dataset.entities} >= {"蜈支洲岛旅游区", "日月湾"}
    assert set(dataset.hashes) == {"passages.jsonl", "mini.jsonl", "lexicon.jsonl"}
    (m04,) = [q for q in dataset.queries if q.query_id == "m04"]
    assert m04.negative_entities == ("日月湾",) and m04.relevant_ids == ("wn-sma-surf",)


def test_duplicate_passage_id_names_both_lines(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "p.jsonl",
        [{"id": "a", "text": "x"}, {"id": "b", "text": "y"}, {"id": "a", "text": "z"}],
    )
    with pytest.raises(
        DataError, match=r"p\.jsonl:3: duplicate passage id 'a' \(first on line 1\)"
    ):
        load_passages(path)


def test_empty_corpus_and_missing_text(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(DataError, match="the corpus is empty"):
        load_passages(empty)
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"id": "a", "text": ""}])
    with pytest.raises(DataError, match=r"bad\.jsonl:1: field 'text'"):
        load_passages(bad)


def test_passage_naming_an_unknown_entity_is_refused(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "p.jsonl",
        [
            {"id": "a", "text": "x", "meta": {"entities": ["甲"]}},
            {"id": "b", "text": "y", "meta": {"entities": ["乙"]}},
        ],
    )
    with pytest.raises(DataError, match=r"p\.jsonl:2: .*\['乙'\]"):
        load_passages(path, {"甲"})


def test_alias_claimed_by_two_entities_is_refused(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "lexicon.jsonl",
        [
            {"name": "亚龙湾", "aliases": ["龙湾"]},
            {"name": "青龙湾", "aliases": ["龙湾"]},
        ],
    )
    with pytest.raises(
        DataError, match=r"lexicon\.jsonl:2: '龙湾' is claimed by '青龙湾' and by '亚龙湾'"
    ):
        load_lexicon(path)


def test_empty_evalset_is_refused(tmp_path: Path) -> None:
    evalset = tmp_path / "e.jsonl"
    evalset.write_text("")
    with pytest.raises(DataError, match="empty"):
        load_native("x", FIXTURE / "corpus" / "mini", evalset)


def test_beir_loads_split_types_and_grades(tmp_path: Path) -> None:
    dataset = load_beir(make_beir(tmp_path / "toy"))
    assert dataset.name == "toy"
    assert [q.query_id for q in dataset.queries] == ["q1", "q2"]
    assert [q.query_type for q in dataset.queries] == ["support", "unknown"]
    assert dataset.queries[1].relevance == {"d2": 2, "3": 0}
    assert [p.id for p in dataset.passages] == ["d1", "d2", "3"]


def test_beir_bad_qrels_line(tmp_path: Path) -> None:
    root = make_beir(tmp_path / "toy")
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\tone\n")
    with pytest.raises(DataError, match=r"test\.tsv:2: score 'one' is not an integer"):
        load_beir(root)


def test_shared_scifact_loads() -> None:
    dataset = load_beir(shared_benchmark("scifact"))
    assert len(dataset.passages) == 5183 and len(dataset.queries) == 300


def test_ids_with_whitespace_are_refused_at_load_with_their_line(tmp_path: Path) -> None:
    root = make_beir(tmp_path / "toy")
    lines = (root / "corpus.jsonl").read_text().splitlines()
    lines[1] = lines[1].replace('"d2"', '"d 2"')
    (root / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"corpus\.jsonl:2: .*'d 2' contains whitespace"):
        load_beir(root)
    evalset = write_jsonl(
        tmp_path / "e.jsonl",
        [
            {
                "query_id": "q 1",
                "query": "x",
                "query_type": "t",
                "label_status": "reviewed",
                "relevant_ids": ["a"],
            },
        ],
    )
    with pytest.raises(DataError, match=r"e\.jsonl:1: query_id 'q 1' contains whitespace"):
        load_evalset(evalset)


def test_passages_without_meta_share_one_read_only_empty_dict(tmp_path: Path) -> None:
    """A corpus of millions of passages holds one empty `meta`, not one each; it cannot be
    filled (every passage would see it), and it survives pickling and copying as itself."""
    import copy
    import json
    import pickle

    from retrieval_bench.records import NO_META

    path = write_jsonl(
        tmp_path / "p.jsonl",
        [
            {"id": "a", "text": "x"},
            {"id": "b", "text": "y", "meta": {}},
            {"id": "c", "text": "z", "meta": {"city": "三亚"}},
        ],
    )
    a, b, c = load_passages(path)
    assert a.meta is NO_META and b.meta is NO_META and a.meta == {} and not a.meta
    assert c.meta == {"city": "三亚"} and c.meta is not NO_META
    with pytest.raises(TypeError):
        a.meta["city"] = "海口"
    with pytest.raises(TypeError):
        a.meta.update(city="海口")
    assert NO_META == {} and json.dumps(a.meta) == "{}"
    assert pickle.loads(pickle.dumps(a)) == a and pickle.loads(pickle.dumps(a)).meta is NO_META
    assert copy.deepcopy(a).meta is NO_META
