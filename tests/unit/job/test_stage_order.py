"""Where each later stage runs: where its class places it (before the top_k cut, the cut, after
it) in the order the nodes are declared, or right after the stage its node's `after` names;
adding a stage is one node."""

from __future__ import annotations

import pytest
from conftest import compose_config

from retrieval_bench.errors import ConfigError
from retrieval_bench.job.build import stage_order, stage_specs
from retrieval_bench.protocols import AFTER_CUT, BEFORE_CUT, CUT

PLACED = {"rerank": BEFORE_CUT, "final": CUT, "context": AFTER_CUT, "a": BEFORE_CUT, "z": AFTER_CUT}


@pytest.mark.parametrize(
    ("names", "anchors", "order"),
    [
        # Declared after the shipped ones: each goes where its class places it.
        (["rerank", "final", "context", "a", "z"], {}, ["rerank", "a", "final", "context", "z"]),
        # `after` moves a stage right after another, `fused` first; followers keep their order.
        (
            ["rerank", "final", "context", "a", "z"],
            {"a": "fused", "z": "final"},
            ["a", "rerank", "final", "z", "context"],
        ),
        (
            ["rerank", "final", "context", "a", "z"],
            {"a": "rerank", "z": "a"},
            ["rerank", "a", "z", "final", "context"],
        ),
    ],
)
def test_the_stages_run_where_their_class_or_their_after_puts_them(
    names: list[str], anchors: dict[str, str], order: list[str]
) -> None:
    assert stage_order(names, PLACED, anchors) == order


def test_a_cycle_of_afters_is_refused_naming_a_key() -> None:
    with pytest.raises(ConfigError) as refused:
        stage_order(["final", "a", "z"], PLACED, {"a": "z", "z": "a"})
    assert refused.value.key == "stages.a.after" and "cycle" in refused.value.message


def test_adding_a_stage_is_one_override_and_after_places_it() -> None:
    """A stage copied from the shipped context node runs after the cut; `after` reorders."""
    node = "{_target_: retrieval_bench.stages.context.ContextBudget, budget_chars: 200}"
    cfg = compose_config([f"+stages.short={node}", "stages.context.budget_chars=400"])
    assert [name for name, _ in stage_specs(cfg)] == ["rerank", "final", "context", "short"]
    cfg = compose_config([f"+stages.short={node}", "+stages.short.after=final"])
    assert [name for name, _ in stage_specs(cfg)] == ["rerank", "final", "short", "context"]
    with pytest.raises(ConfigError) as refused:
        stage_specs(compose_config([f"+stages.short={node}", "+stages.short.after=rerank"]))
    assert refused.value.key == "stages.short.after"
    assert "runs after the top_k cut" in refused.value.message
