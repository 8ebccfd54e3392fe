"""group_by values: meta fields of the relevant passages, query fields, length buckets."""

from __future__ import annotations

import pytest

from retrieval_bench.errors import ConfigError
from retrieval_bench.records import EvalQuery, Passage
from retrieval_bench.scoring.aggregate import score_stage
from retrieval_bench.scoring.groups import build_group_by, check_field, length_bucket, query_length
from retrieval_bench.scoring.labels import judge

PASSAGES = [
    Passage("a", "t", meta={"file_type": "pdf", "tags": ["x", "y"]}),
    Passage("b", "t", meta={"file_type": "xlsx"}),
    Passage("c", "t", meta={"file_type": "pdf"}),
    Passage("d", "t"),
]
QUERIES = [
    EvalQuery("q1", "短问题", "t", "reviewed", {"a": 1, "c": 1}, user_role="hr"),
    EvalQuery("q2", "一个稍微长一点的问题，有标点！", "t", "reviewed", {"a": 1, "b": 1}),
    EvalQuery("q3", "x" * 31, "t", "reviewed", {"d": 1}),
    EvalQuery("q4", "没有答案", "t", "no_answer", {}, expected_cities=("三亚", "海口")),
]


def test_meta_values_single_joined_missing_and_no_relevant() -> None:
    groups = build_group_by(["meta.file_type", "meta.tags"], QUERIES, PASSAGES)
    assert groups["meta.file_type"] == {
        "q1": "pdf",
        "q2": "(mixed)",
        "q3": "(missing)",
        "q4": "(no relevant)",
    }
    assert groups["meta.tags"]["q1"] == "(mixed)"  # a has x and y, c has no tags
    only_a = EvalQuery("qa", "q", "t", "reviewed", {"a": 1})
    single = build_group_by(["meta.tags", "meta.file_type"], [only_a], PASSAGES)
    assert single == {"meta.tags": {"qa": "(mixed)"}, "meta.file_type": {"qa": "pdf"}}


def test_query_fields_and_length_buckets() -> None:
    groups = build_group_by(["user_role", "expected_cities", "query_length"], QUERIES, PASSAGES)
    assert groups["user_role"] == {
        "q1": "hr",
        "q2": "(missing)",
        "q3": "(missing)",
        "q4": "(missing)",
    }
    assert groups["expected_cities"]["q4"] == "三亚+海口"
    assert query_length("一个稍微长一点的问题，有标点！") == 13  # punctuation does not count
    assert groups["query_length"] == {"q1": "00-10", "q2": "11-20", "q3": "31+", "q4": "00-10"}
    assert [length_bucket(n) for n in (0, 10, 11, 20, 21, 30, 31)] == [
        "00-10",
        "00-10",
        "11-20",
        "11-20",
        "21-30",
        "21-30",
        "31+",
    ]


def test_unknown_fields_fail_with_the_key() -> None:
    with pytest.raises(ConfigError, match=r"scoring\.group_by"):
        check_field("query_type")
    with pytest.raises(ConfigError, match=r"no passage of the corpus has meta\.city"):
        build_group_by(["meta.city"], QUERIES, PASSAGES)


def test_groups_partition_the_queries() -> None:
    groups = build_group_by(["meta.file_type"], QUERIES, PASSAGES)
    rankings = {"q1": ["a"], "q2": ["b", "a"], "q3": ["d"], "q4": ["a"]}
    result = score_stage(rankings, judge(QUERIES, {p.id for p in PASSAGES}), [2], groups)
    by_field = result["by_meta.file_type"]
    assert sum(g["n"] for g in by_field.values()) == result["overall"]["n"] == 3
    counts = result["counts"]["by_meta.file_type"]
    assert counts["(no relevant)"] == {"scored": 0, "excluded": {"no_answer": 1}}
    assert by_field["(mixed)"]["recall@2"] == 1.0
    assert by_field["(no relevant)"]["undefined"].startswith("no scorable queries")
