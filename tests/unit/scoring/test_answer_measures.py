"""The answer metrics are a family of the one metric registry: declared there, looked up there,
better when larger, with no cut-off; a judge's score is `judge_<name>`."""

from __future__ import annotations

import pytest

from retrieval_bench.scoring import registry
from retrieval_bench.scoring.measure_names import canonical_metric


def test_the_answer_family_is_declared_in_the_registry() -> None:
    assert registry.answer_measures() == [
        "source_coverage",
        "citation_precision",
        "citation_validity",
        "refusal_correct",
    ]
    for name in (*registry.answer_measures(), "judge_faithfulness"):
        measure = registry.find(name)
        assert measure.family == registry.ANSWER and measure.higher_is_better
        assert registry.is_answer_measure(name) and not registry.lower_is_better(name)
        assert canonical_metric(name, "k") == name  # no cut-off to add
    assert not registry.is_answer_measure("recall@K") and not registry.is_answer_measure("judge_")
    assert "source_coverage" not in registry.known_metrics()  # not a stage's measure


def test_an_undeclared_name_is_not_taken_for_higher_is_better() -> None:
    with pytest.raises(KeyError):
        registry.lower_is_better("exact_match")
    with pytest.raises(ValueError, match="taken"):
        registry.register_measure("source_coverage", lambda rg: rg.grades)
