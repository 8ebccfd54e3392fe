"""Review mends of the core: the manifest's tokenizer comes from the arm that tokenises, and
`evaluate` keeps a `retriever.arms` that fuses a caller's arm with a configured one."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.fakes import TitleSpec

from retrieval_bench import Dataset, EvalQuery, Passage, compose, evaluate
from retrieval_bench.errors import ConfigError
from retrieval_bench.text.tokenizer import Tokenizer

PASSAGES = (
    Passage("a", "海口骑楼老街", title="骑楼"),
    Passage("b", "三亚湾的日落", title="日落"),
    Passage("c", "椰梦长廊", title="长廊"),
)
QUERIES = (
    EvalQuery("q1", "骑楼在哪", "place", "reviewed", {"a": 1}),
    EvalQuery("q2", "看日落", "place", "reviewed", {"b": 1, "c": 0}),
)
DATASET = Dataset("mine", PASSAGES, QUERIES)


def test_a_job_without_a_bm25_arm_records_no_tokenizer(tmp_path: Path) -> None:
    cfg = compose(["top_k=2", "retriever.pool_size=3", f"cache_dir={tmp_path}"])
    result = evaluate(cfg, dataset=DATASET, arms={"title": TitleSpec()})
    assert cfg.retriever.arms == ["title"]
    assert result.tokenizer == {}


def test_a_bm25_job_records_its_arms_tokenizer(tmp_path: Path) -> None:
    cfg = compose(["top_k=2", "retriever.pool_size=3", f"cache_dir={tmp_path}"])
    result = evaluate(cfg, dataset=DATASET)
    assert result.tokenizer == Tokenizer.for_entities(cfg.text, DATASET.entities).identity()


def test_evaluate_keeps_arms_that_fuse_a_callers_arm_with_a_configured_one(
    tmp_path: Path,
) -> None:
    cfg = compose(["top_k=2", "retriever.pool_size=3", f"cache_dir={tmp_path}"])
    cfg.retriever.arms = ["bm25", "title"]
    result = evaluate(cfg, dataset=DATASET, arms={"title": TitleSpec()})
    assert cfg.retriever.arms == ["bm25", "title"]
    assert list(result.metrics["stages"]) == ["bm25", "title", "fused", "final"]
    assert set(result.indexes) == {"bm25", "title"}


def test_evaluate_refuses_a_typo_beside_a_callers_arm(tmp_path: Path) -> None:
    cfg = compose(["top_k=2", "retriever.pool_size=3", f"cache_dir={tmp_path}"])
    cfg.retriever.arms = ["bm25", "titel"]
    with pytest.raises(ConfigError, match=r"unknown arm 'titel'; did you mean 'title'"):
        evaluate(cfg, dataset=DATASET, arms={"title": TitleSpec()})
