"""Every config key can be overridden from the command line, and validation names the key."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, compose_config
from omegaconf import DictConfig, ListConfig, OmegaConf

from retrieval_bench.config import RunConfig
from retrieval_bench.errors import ConfigError
from retrieval_bench.fusion import Fill, ReciprocalRankFusion, ScoreFusion
from retrieval_bench.job.check import check_config
from retrieval_bench.retrievers.bm25 import BM25ArmSpec
from retrieval_bench.retrievers.dense import DenseArmSpec
from retrieval_bench.retrievers.lucene import LuceneArmSpec
from retrieval_bench.retrievers.run_file import RunFileArmSpec
from retrieval_bench.stages.context import ContextBudget
from retrieval_bench.stages.cut import TopKCut
from retrieval_bench.stages.rerank import CrossEncoderRerank


def compose_run(overrides: list[str]) -> DictConfig:
    """The composed config before validation, as a DictConfig (its leaves are the keys)."""
    return OmegaConf.structured(compose_config(overrides, check=False))


def leaves(node: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(node, DictConfig):
        for key in node:
            if OmegaConf.is_missing(node, key):
                continue
            yield from leaves(node[key], f"{prefix}{key}.")
    elif not isinstance(node, ListConfig):
        yield prefix[:-1], node


BM25_ARMS = (
    "bm25", "bm25_nohmm", "bm25_nolexicon", "bm25_bigram", "bm25_lucene", "bm25_lucene_cjk",
)  # fmt: skip
M3_ARMS = ("m3_dense", "m3_sparse", "m3_colbert", "m3")
# A different valid value for every string key (numbers and booleans are changed by rule).
STRING_ALTERNATIVES = {
    "dataset.name": "mine",
    "dataset.format": "beir",
    "dataset.corpus": "corpus/mine",
    "dataset.evalset": "evalsets/mine.jsonl",
    "dataset.path": "data/mine",
    "dataset.split": "dev",
    "retriever.name": "mine",
    "retriever.combine": "fill",
    "combiners.score.normalize": "zscore",
    "combiners.score.method": "combmnz",
    "retriever.type_weights_from": "label",
    "tune.metric": "recall@K",
    "tune.stage": "context",
    "tune.sampler": "random",
    "tune.dir": "outputs/tune/mine",
    "encoder._target_": "retrieval_bench.encoders.flag.FlagModelEncoder",
    "encoder.model": "BAAI/bge-small-zh-v1.5",
    "encoder.pooling": "mean",
    "encoder.query_instruction": "query: ",
    "encoder.precision": "fp16",
    "encoder.path": "vectors.npy",
    "encoder.ids_path": "ids.txt",
    "encoder.query_path": "queries.npy",
    "encoder.query_ids_path": "query_ids.txt",
    "router.name": "learned",
    "router.model": "outputs/elsewhere/router.json",
    "router.mode": "soft",
    "router.metric": "recall@K",
    "router.fallback": "rrf_50_50",
    "router.default_route": "multi_hop",
    **{f"arms.{arm}.impl": "rank_bm25" for arm in BM25_ARMS},
    **{f"arms.{arm}.tokens": "char_bigram" for arm in BM25_ARMS if arm != "bm25_bigram"},
    **{f"arms.{arm}.variant": "lucene" for arm in BM25_ARMS if "lucene" not in arm},
    "text.impl": "jieba",
    "text.analyzer": "english",
    "arms.dense.index": "HNSW16",
    "arms.run_file.path": "other_system.run",
    "scoring.unit": "doc",
    "refusal.score_stage": "final",
    "stages.rerank.model": "BAAI/bge-reranker-v2-m3",
    "stages.rerank.precision": "fp16",
    "cache_dir": "elsewhere/cache",
    "compare.stage": "fused",
    "tracking.kind": "mlflow",
    "tracking.uri": "http://127.0.0.1:5000",
    "tracking.experiment": "mine",
    "compare.family": "cell",
    "compare.correction": "bh",
    "compare.estimate": "active",
    "compare.label_plan": "outputs/plan",
    "benchmark.month": "2026-01",
    "benchmark.root": "elsewhere/benchmarks",
    "benchmark.launcher": "parallel",
    "benchmark.baseline": "2025-12",
    "benchmark.baseline_from": "tracking",
    "benchmark.judge.kind": "openai",
    "benchmark.judge.model": "qwen2.5-7b-instruct",
    "benchmark.judge.url": "http://127.0.0.1:8000/v1",
    "benchmark.judge.prompt_en": "prompts/en.txt",
    "benchmark.judge.prompt_zh": "prompts/zh.txt",
    "benchmark.judge.api_key_env": "MY_API_KEY",
    **{f"arms.{arm}._target_": "test_config.OtherBM25" for arm in BM25_ARMS},
    "arms.dense._target_": "test_config.OtherDense",
    "arms.run_file._target_": "test_config.OtherRunFile",
    **{f"arms.{arm}.model": "/models/bge-m3" for arm in M3_ARMS},
    **{f"arms.{arm}.precision": "bf16" for arm in M3_ARMS},
    **{
        f"arms.{arm}._target_": "my_arms.Other"
        for arm in M3_ARMS
    },
    "arms.m3_dense.mode": "sparse",
    "arms.m3_sparse.mode": "colbert",
    "arms.m3_colbert.mode": "all",
    "arms.m3.mode": "dense",
    "arms.service.url": "http://127.0.0.1:8080/search",
    "arms.service.results_path": "data.hits",
    "arms.service.id_field": "doc.id",
    "arms.service.score_field": "",
    "arms.service.on_error": "skip",
    "arms.service._target_": "my_arms.OtherServiceSpec",
    "arms.bm25_bigram.tokens": "jieba",
    # The Lucene arms (docs/how-to/lucene-bm25.md).
    "arms.bm25_lucene.variant": "rank_bm25",
    "arms.bm25_lucene_cjk.variant": "rank_bm25",
    "arms.bm25_lucene_cjk.text.analyzer": "english",
    "arms.lucene._target_": "test_config.OtherLucene",
    "arms.lucene.heap": "4g",
    # The robustness node.
    "robustness.entities": "too",
    "robustness.opencc_traditional": "s2tw",
    "robustness.opencc_simplified": "tw2s",
    # Stages and combiners are instantiated when the config is checked: real classes.
    "stages.rerank._target_": "test_config.OtherRerank",
    "stages.final._target_": "test_config.OtherCut",
    "stages.context._target_": "test_config.OtherContext",
    "combiners.rrf._target_": "test_config.OtherRRF",
    "combiners.score._target_": "test_config.OtherScoreFusion",
    "combiners.fill._target_": "test_config.OtherFill",
}


class OtherBM25(BM25ArmSpec):
    """Another BM25 arm class: its node keeps its keyword arguments."""


class OtherLucene(LuceneArmSpec):
    """Another Lucene arm class."""


class OtherDense(DenseArmSpec):
    """Another dense arm class."""


class OtherRunFile(RunFileArmSpec):
    """Another run_file arm class."""


class OtherRerank(CrossEncoderRerank):
    """Another rerank stage class, for the override test."""


class OtherCut(TopKCut):
    """Another cut class."""


class OtherContext(ContextBudget):
    """Another context stage class."""


class OtherRRF(ReciprocalRankFusion):
    """Another combiner class."""


class OtherScoreFusion(ScoreFusion):
    """Another combiner class."""


class OtherFill(Fill):
    """Another combiner class."""


def different(key: str, value: Any, strings: dict[str, str]) -> Any:
    """A valid value for `key` other than its default `value`."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value / 2
    assert key in strings, (
        f"new string key {key!r}: add a different valid value to STRING_ALTERNATIVES"
    )
    return strings[key]


def test_every_scalar_key_takes_a_different_value_from_the_command_line(tmp_path: Path) -> None:
    """An override that were ignored would leave the default in place: each key is set to
    something else, and the composed, typed and validated config holds exactly that."""
    rules = (ROOT / "conf" / "router" / "rules.yaml").read_text(encoding="utf-8")
    rules_file = tmp_path / "rules.yaml"
    rules_file.write_text(rules.replace("name: rules\n", ""), encoding="utf-8")
    strings = {**STRING_ALTERNATIVES, "router.rules_file": str(rules_file)}
    cfg = compose_run([])
    expected = {}
    for key, value in leaves(cfg):
        # Keys holding "@" (metric names as mapping keys) cannot be spelled as overrides.
        if key.startswith("hydra") or value is None or "@" in key:
            continue
        expected[key] = different(key, value, strings)
        assert expected[key] != value, key
    assert {
        "top_k", "retriever.pool_size", "arms.bm25.k1", "combiners.rrf.k", "filters.city",
        "dataset.name",
    } <= set(expected)  # fmt: skip
    overrides = [
        f"{key}={str(v).lower()}"
        if isinstance(v, bool)
        else f"{key}='{v}'"
        if isinstance(v, str)
        else f"{key}={v!r}"
        for key, v in expected.items()
    ]
    again = compose_run(overrides)
    composed = dict(leaves(again))
    assert {key: composed[key] for key in expected} == expected
    typed: RunConfig = OmegaConf.to_object(again)  # type: ignore[assignment]
    assert (
        typed.top_k == 7 and typed.retriever.combine == "fill" and typed.arms["bm25"]["b"] == 0.375
    )
    assert typed.filters.permissions is False and typed.encoder.precision == "fp16"
    # fp16 is refused unless every encoder device is a GPU, and a GPU device is refused where
    # none is present (this machine): the one key whose different value cannot validate here.
    typed.encoder.precision = "fp32"
    typed.stages["rerank"]["precision"] = "fp32"  # the same for the reranker's devices
    check_config(typed)


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("top_k=0", "top_k"),
        ("retriever.pool_size=-3", "retriever.pool_size"),
        ("combiners.rrf.k=-1", "combiners.rrf.k"),
        ("combiners.fill.k=-1", "combiners.fill.k"),
        ("retriever.arms=[bm25,sparse]", "retriever.arms[1]"),
        ("arms.bm25.b=1.5", "arms.bm25.b"),
        ("arms.bm25_bigram.b=-0.5", "arms.bm25_bigram.b"),
        ("scoring.cutoffs=[10,0]", "scoring.cutoffs[1]"),
    ],
)
def test_out_of_range_values_name_their_key(override: str, key: str) -> None:
    cfg: RunConfig = OmegaConf.to_object(compose_run([override]))  # type: ignore[assignment]
    with pytest.raises(ConfigError, match=re.escape(f"config key '{key}'")):
        check_config(cfg)


@pytest.mark.parametrize("override", ["arms.bm25.b=0", "arms.bm25.b=1", "arms.bm25.k1=0"])
def test_range_ends_are_valid_values(override: str) -> None:
    # b = 1 is full length normalisation and b = 0 none (rank_bm25 takes both): the range is
    # closed, so a refusal of either end would turn a valid setting away.
    cfg: RunConfig = OmegaConf.to_object(compose_run([override]))  # type: ignore[assignment]
    check_config(cfg)


def test_defaults_validate_and_are_the_documented_ones() -> None:
    cfg: RunConfig = OmegaConf.to_object(compose_run([]))  # type: ignore[assignment]
    check_config(cfg)
    assert (cfg.dataset.name, cfg.retriever.name, cfg.encoder._target_) == (
        "travel",
        "hybrid",
        "retrieval_bench.encoders.use.USEEncoder",
    )
    assert (cfg.top_k, cfg.retriever.pool_size, cfg.combiners["rrf"]["k"]) == (6, 10, 60)
    assert cfg.retriever.arms == ["bm25", "dense"] and cfg.retriever.combine == "rrf"
