"""ir_measures' spelling of a measure (`nDCG@10`) is accepted wherever a metric is named in
config or on the command line, and means the project's metric; a typo is refused with the key
at fault and the nearest known name."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval_bench.config.benchmark import BenchmarkConfig, GateConfig
from retrieval_bench.config.compare import CompareConfig
from retrieval_bench.errors import ConfigError
from retrieval_bench.scoring.aggregate import metric_names
from retrieval_bench.scoring.measure_names import (
    canonical_benchmark_metrics,
    canonical_compare_metrics,
    canonical_metric,
    known_metrics,
)
from run import compare

SPELLINGS = {
    "nDCG@10": "ndcg@10",
    "R@100": "recall@100",
    "P@5": "precision@5",
    "RR@10": "mrr@10",
    "Success@10": "hit@10",
    "Judged@10": "judged@10",
    "AP@10": "map@10",
    "nDCG@K": "ndcg@K",
    "ndcg@10": "ndcg@10",
    "readable_map@6": "readable_map@6",
}


@pytest.mark.parametrize(("spelling", "name"), SPELLINGS.items())
def test_ir_measures_spelling_maps_to_the_project_name(spelling: str, name: str) -> None:
    assert canonical_metric(spelling, "compare.metrics[0]") == name


def test_every_mapped_name_is_reported_in_metrics_json() -> None:
    reported = {name.partition("@")[0] for name in metric_names([10])}
    assert {n.partition("@")[0] for n in SPELLINGS.values()} - {"readable_map"} <= reported
    assert "readable_map" in known_metrics()


@pytest.mark.parametrize(
    ("spelling", "message"),
    [
        ("ndgc@10", "config key 'k': 'ndgc@10' is not a metric: did you mean 'ndcg@10'?"),
        ("NDCG@K", "config key 'k': 'NDCG@K' is not a metric: did you mean 'nDCG@K'?"),
        ("AP", "config key 'k': 'AP' has no cut-off: write AP@K (K: each job's top_k) or AP@<int>"),
        ("recall", "config key 'k': 'recall' is not METRIC@K or METRIC@<int>"),
        ("recall@ten", "config key 'k': 'recall@ten' is not METRIC@K or METRIC@<int>"),
    ],
)
def test_unknown_or_malformed_names_are_refused(spelling: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        canonical_metric(spelling, "k")
    assert str(err.value) == message


def test_compare_config_maps_its_metrics() -> None:
    cfg = CompareConfig(metrics=["nDCG@K", "R@100", "map@K"])
    canonical_compare_metrics(cfg)
    assert cfg.metrics == ["ndcg@K", "recall@100", "map@K"]


def test_compare_config_names_the_index_of_a_typo() -> None:
    with pytest.raises(ConfigError, match=r"compare.metrics\[1\]'.*did you mean 'ndcg@K'"):
        canonical_compare_metrics(CompareConfig(metrics=["recall@K", "ndgc@K"]))


def test_benchmark_config_maps_tolerances_and_trend_metrics() -> None:
    gate = GateConfig(tolerances={"R@K": 0.02, "nDCG@K": 0.01})
    cfg = BenchmarkConfig(enabled=True, gate=gate, trend_metrics=["RR@K", "AP@K"])
    canonical_benchmark_metrics(cfg)
    assert cfg.gate.tolerances == {"recall@K": 0.02, "ndcg@K": 0.01}
    assert cfg.trend_metrics == ["mrr@K", "map@K"]


def test_benchmark_config_refuses_one_metric_spelt_twice() -> None:
    gate = GateConfig(tolerances={"recall@K": 0.02, "R@K": 0.01})
    with pytest.raises(ConfigError, match=r"tolerances.R@K'.*names recall@K twice"):
        canonical_benchmark_metrics(BenchmarkConfig(enabled=True, gate=gate))


def test_benchmark_config_refuses_a_typo_in_trend_metrics() -> None:
    cfg = BenchmarkConfig(enabled=True, trend_metrics=["mrr@K", "hti@K"])
    with pytest.raises(ConfigError, match=r"trend_metrics\[1\]'.*did you mean 'hit@K'"):
        canonical_benchmark_metrics(cfg)


def test_run_compare_refuses_a_typo_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert compare.main([str(tmp_path), "--metric", "ndgc@K", "--no-write"]) == 2
    assert "config key 'compare.metrics[0]': 'ndgc@K' is not a metric: did you mean 'ndcg@K'?" in (
        capsys.readouterr().err
    )
