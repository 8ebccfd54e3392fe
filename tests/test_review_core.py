"""Review mends of the core: the manifest's tokenizer comes from the arm that tokenises, and
`evaluate` keeps a `retriever.arms` that fuses a caller's arm with a configured one."""

from __future__ import annotations

from pathlib import Path

from test_open_pipeline import _TitleSpec

from retrieval_bench import Dataset, EvalQuery, Passage, compose, evaluate
from retrieval_bench.text import Tokenizer

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
    result = evaluate(cfg, dataset=DATASET, arms={"title": _TitleSpec()})
    assert cfg.retriever.arms == ["title"]
    assert result.tokenizer == {}


def test_a_bm25_job_records_its_arms_tokenizer(tmp_path: Path) -> None:
    cfg = compose(["top_k=2", "retriever.pool_size=3", f"cache_dir={tmp_path}"])
    result = evaluate(cfg, dataset=DATASET)
    assert result.tokenizer == Tokenizer.for_entities(cfg.text, DATASET.entities).identity()

