"""The `compare:` node's own checks: baseline spellings, the correction, the family, metric names;
and how a sweep's overrides are read back and told apart."""

from __future__ import annotations

import pytest

from retrieval_bench.config.compare import ANY_KEY, CompareConfig
from retrieval_bench.errors import ConfigError
from retrieval_bench.jobdir.read import canonical, parse_overrides
from retrieval_bench.scoring.measure_names import canonical_compare_metrics


def test_override_parsing_and_canonical_values() -> None:
    parsed = parse_overrides(["retriever=bm25", "+top_k=8", "~router", "filters.city=false"])
    assert parsed == {
        "retriever": "bm25",
        "top_k": "8",
        "router": "(deleted)",
        "filters.city": "false",
    }
    assert canonical(False) == "false" and canonical(6) == "6" and canonical(None) == "null"


def test_compare_config_baseline_spellings() -> None:
    assert CompareConfig(baselines=[{"top_k": 6}]).baseline_settings() == [{"top_k": 6}]
    assert CompareConfig(baselines=["top_k=6,retriever=bm25"]).baseline_settings() == [
        {"top_k": "6", "retriever": "bm25"}
    ]
    assert CompareConfig().baseline_settings() == []
    # A bare value names a varying key's; a key's old spelling is read as its new home, as the
    # sweep's own overrides are.
    assert CompareConfig(baselines=["bm25", {"top_k": 6}]).baseline_settings() == [
        {ANY_KEY: "bm25"},
        {"top_k": 6},
    ]
    assert CompareConfig(baselines=["bm25.k1=0.9,retriever.rrf_k=20"]).baseline_settings() == [
        {"arms.bm25.k1": "0.9", "combiners.rrf.k": "20"}
    ]
    with pytest.raises(ConfigError, match=r"compare\.baselines\[0\]"):
        CompareConfig(baselines=["=6"]).validate()
    with pytest.raises(ConfigError, match=r"compare\.baselines\[1\]"):
        CompareConfig(baselines=["bm25", "top_k=6,=8"]).validate()
    with pytest.raises(ConfigError, match=r"compare\.metrics"):
        canonical_compare_metrics(CompareConfig(metrics=["recall"]))


def test_correction_is_typed_and_validated() -> None:
    with pytest.raises(ConfigError, match=r"compare\.correction"):
        CompareConfig(correction="bonferroni").validate()
    with pytest.raises(ConfigError, match=r"compare\.power"):
        CompareConfig(power=1.0).validate()
    with pytest.raises(ConfigError, match=r"compare\.target_delta"):
        CompareConfig(target_delta=0.0).validate()
    CompareConfig(correction="bh").validate()


def test_compare_family_is_validated() -> None:
    with pytest.raises(ConfigError, match=r"compare\.family"):
        CompareConfig(family="row").validate()
    with pytest.raises(ConfigError, match=r"compare\.weak_below"):
        CompareConfig(weak_below=2.0).validate()
    assert CompareConfig().family == "table"
