"""What a learned router chooses among, and the checks of its settings: the candidates of hard
routing (arms, hybrid, the rules' strategies, a duplicate counted once), soft routing's weight
vectors, and each bad setting refused naming its key."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from retrieval_bench.config.router import RouterConfig
from retrieval_bench.errors import ConfigError
from retrieval_bench.paths import PROJECT_ROOT
from retrieval_bench.routing.candidates import check_learned, soft_candidates, soft_weights
from retrieval_bench.routing.rules import RuleSet, load_rule_set

ARMS = ("bm25", "dense")


def learned(**keys: object) -> tuple[RouterConfig, RuleSet | None]:
    """conf/router/learned.yaml (its rules are the shipped ones) with `keys` set."""
    rules = OmegaConf.load(PROJECT_ROOT / "conf" / "router" / "rules.yaml")
    own = OmegaConf.load(PROJECT_ROOT / "conf" / "router" / "learned.yaml")
    own.pop("defaults")
    merged = OmegaConf.merge(OmegaConf.structured(RouterConfig), rules, own, keys)
    cfg = OmegaConf.to_object(merged)
    assert isinstance(cfg, RouterConfig)
    return cfg, load_rule_set(cfg, ARMS)


def test_hard_candidates_are_the_arms_hybrid_and_the_rules_strategies_once() -> None:
    cfg, rule_set = learned()
    candidates = check_learned(cfg, rule_set, ARMS, ARMS)
    # The rules' `hybrid` strategy is the built-in hybrid: listed once.
    assert [c.name for c in candidates] == [
        "bm25",
        "dense",
        "hybrid",
        "bm25_first",
        "exclude_then_fuse",
    ]
    by_name = {c.name: c for c in candidates}
    assert by_name["bm25_first"].combine == "fill"
    assert by_name["exclude_then_fuse"].exclude and not by_name["hybrid"].exclude


def test_named_candidates_keep_their_order() -> None:
    cfg, rule_set = learned(candidates=["exclude_then_fuse", "bm25"])
    assert [c.name for c in check_learned(cfg, rule_set, ARMS, ARMS)] == [
        "exclude_then_fuse",
        "bm25",
    ]


def test_soft_candidates_are_the_weight_vectors_that_sum_to_one() -> None:
    assert soft_weights(2) == [(1.0, 0.0), (0.75, 0.25), (0.5, 0.5), (0.25, 0.75), (0.0, 1.0)]
    three = soft_weights(3)
    assert len(three) == 15 and all(abs(sum(w) - 1) < 1e-12 for w in three)
    soft = soft_candidates(ARMS)
    assert [c.name for c in soft] == [
        "rrf_100_0",
        "rrf_75_25",
        "rrf_50_50",
        "rrf_25_75",
        "rrf_0_100",
    ]
    assert all(c.exclude and c.combine == c.name and c.arms == ARMS for c in soft)
    cfg, rule_set = learned(mode="soft", fallback="rrf_50_50")
    assert check_learned(cfg, rule_set, ARMS, ARMS) == soft


@pytest.mark.parametrize(
    ("keys", "key", "message"),
    [
        ({"mode": "medium"}, "router.mode", "not one of: hard, soft"),
        ({"candidates": ["bm25", "hybird"]}, "router.candidates[1]", "did you mean 'hybrid'"),
        ({"candidates": ["bm25", "bm25"]}, "router.candidates[1]", "listed twice"),
        ({"candidates": ["bm25"]}, "router.candidates", "two candidates or more"),
        ({"mode": "soft", "candidates": ["bm25"]}, "router.candidates", "router.mode=hard"),
        ({"fallback": "dens"}, "router.fallback", "did you mean 'dense'"),
        ({"estimators": {"tree": [3.0]}}, "router.estimators.tree", "unknown model family"),
        ({"estimators": {"ridge": []}}, "router.estimators.ridge", "alpha values"),
        ({"estimators": {"ridge": [0.0]}}, "router.estimators.ridge[0]", "alpha must be > 0"),
        ({"estimators": {"forest": [2.5]}}, "router.estimators.forest[0]", "integer >= 1"),
        ({"margins": []}, "router.margins", "one margin or more"),
        ({"margins": [-0.1]}, "router.margins[0]", "must be >= 0"),
    ],
)
def test_a_bad_setting_is_refused_naming_its_key(
    keys: dict[str, object], key: str, message: str
) -> None:
    cfg, rule_set = learned()
    for name, value in keys.items():
        if name == "estimators":
            cfg.estimators = value  # type: ignore[assignment]  # replaces, as `~` then `+` would
        else:
            setattr(cfg, name, value)
    with pytest.raises(ConfigError) as info:
        check_learned(cfg, rule_set, ARMS, ARMS)
    assert str(info.value).startswith(f"config key '{key}': ")
    assert message in str(info.value)


def test_soft_routing_needs_two_fused_arms() -> None:
    cfg, rule_set = learned(mode="soft")
    with pytest.raises(ConfigError, match=r"router\.mode.*two arms or more"):
        check_learned(cfg, rule_set, ARMS, ("bm25",))


def test_a_saved_router_is_only_read_by_router_learned() -> None:
    cfg = RouterConfig(name="rules", model="router.json")
    with pytest.raises(ConfigError, match=r"router\.model.*only read with router=learned"):
        load_rule_set(cfg, ARMS)
