"""The plug-in boundary (retrieval_bench.plugins): what goes wrong inside a plug-in from outside
the package is that plug-in's failure, exit 2 naming it, the method and the message; inside one
of the package's own plug-ins it stays the project's bug (exit 3, its traceback kept). Keyword
values are checked against the class's annotations when the config is read, and a stage before
the cut may not return more than it was given.

The faulty plug-ins are tests/support/faulty_plugins.py, run on the mini fixture."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import compose_config, mini_overrides

from retrieval_bench.api import evaluate
from retrieval_bench.errors import ConfigError
from retrieval_bench.job.contract import ContractError
from retrieval_bench.plugins import PluginError
from run.exits import bad_input_message

SUPPORT = "support.faulty_plugins"
ARM = f"{SUPPORT}.FaultyArmSpec"


def faulty_arm(tmp_path: Path, fault: str, *extra: str) -> list[str]:
    """Overrides of a mini job whose one arm is the faulty arm `bad` with `fault`."""
    return [
        *mini_overrides(tmp_path),
        f"+arms.bad._target_={ARM}",
        f"+arms.bad.fault={fault}",
        "retriever.arms=[bad]",
        "cost.latency_queries=0",
        *extra,
    ]


@pytest.mark.parametrize(
    ("fault", "says"),
    [
        ("raise_in_check", f"arm 'bad': {ARM}.check() raised FaultError: planted fault in check"),
        ("raise_in_build", f"arm 'bad': {ARM}.build() raised FaultError: planted fault in build"),
        (
            "raise_in_search",
            f"arm 'bad': {SUPPORT}.FaultyArm.search() raised FaultError: planted fault in search",
        ),
        (
            "raise_in_info",
            f"arm 'bad': {SUPPORT}.FaultyArm.info() raised FaultError: planted fault in info",
        ),
        ("info_not_json", f"arm 'bad': {SUPPORT}.FaultyArm.info() is not JSON, which the manifest"),
        (
            "built_without_search",
            f"arm 'bad': {ARM}.build() returned object, which has no search() method (an Arm "
            "has search(), info()",
        ),
    ],
)
def test_an_outside_arm_that_fails_is_named_with_its_method(
    tmp_path: Path, fault: str, says: str
) -> None:
    cfg = compose_config(faulty_arm(tmp_path, fault))
    with pytest.raises(PluginError) as refused:
        evaluate(cfg)
    message = str(refused.value)
    assert message.startswith(says), message
    assert bad_input_message(refused.value) == message  # exit 2 with this line (run.exits)


def test_an_outside_specs_own_init_failure_is_named_at_the_config_check(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as refused:
        compose_config(faulty_arm(tmp_path, "raise_in_init"))
    assert str(refused.value) == (
        f"config key 'arms.bad': {ARM}.__init__() raised FaultError: planted fault in init"
    )


@pytest.mark.parametrize(
    ("fault", "says"),
    [
        (
            "raise_in_active",
            f"stage 'pad': {SUPPORT}.FaultyStageSpec.active() raised FaultError: planted fault",
        ),
        (
            "raise_in_stage_build",
            f"stage 'pad': {SUPPORT}.FaultyStageSpec.build() raised FaultError: planted fault",
        ),
        (
            "raise_in_apply",
            f"stage 'pad': {SUPPORT}.PaddingStage.apply() raised FaultError: planted fault",
        ),
        (
            "grow_before_cut",
            "stage 'pad', query m01: returned 11 passages, more than the 10 it was given (a "
            "stage before the top_k cut re-orders or selects from its input)",
        ),
    ],
)
def test_an_outside_stage_that_fails_is_named(tmp_path: Path, fault: str, says: str) -> None:
    cfg = compose_config(
        faulty_arm(
            tmp_path,
            "",
            f"+stages.pad._target_={SUPPORT}.FaultyStageSpec",
            f"+stages.pad.fault={fault}",
            "retriever.pool_size=10",
            "filters.city=false",  # the padding is any passage, allowed or not
        )
    )
    with pytest.raises(PluginError) as refused:
        evaluate(cfg)
    assert str(refused.value).startswith(says), str(refused.value)
    if fault == "grow_before_cut":
        assert isinstance(refused.value, ContractError)


@pytest.mark.parametrize(
    ("fault", "says"),
    [
        (
            "raise_in_combiner_build",
            f"combiner 'first': {SUPPORT}.FaultyCombinerSpec.build() raised FaultError",
        ),
        (
            "built_without_combine",
            f"combiner 'first': {SUPPORT}.FaultyCombinerSpec.build() returned object, which "
            "has no combine() method",
        ),
    ],
)
def test_an_outside_combiner_that_fails_is_named(tmp_path: Path, fault: str, says: str) -> None:
    cfg = compose_config(
        [
            *mini_overrides(tmp_path),
            f"+arms.one._target_={ARM}",
            f"+arms.two._target_={ARM}",
            "retriever.arms=[one,two]",
            f"+combiners.first._target_={SUPPORT}.FaultyCombinerSpec",
            f"+combiners.first.fault={fault}",
            "retriever.combine=first",
        ]
    )
    with pytest.raises(PluginError) as refused:
        evaluate(cfg)
    assert str(refused.value).startswith(says), str(refused.value)


def test_a_shipped_plugins_own_exception_stays_the_projects_bug(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same exception from the package's own cut is not blamed on a plug-in: it keeps its
    type and traceback, which run.exits reports as an internal error (exit 3)."""
    from retrieval_bench.stages.cut import TopKCutStage

    def broken(self: object, queries: object, rankings: object) -> None:
        raise ZeroDivisionError("a bug of ours")

    monkeypatch.setattr(TopKCutStage, "apply", broken)
    with pytest.raises(ZeroDivisionError) as raised:
        evaluate(compose_config(faulty_arm(tmp_path, "")))
    assert bad_input_message(raised.value) is None


@pytest.mark.parametrize(
    ("override", "key", "says"),
    [
        ("+arms.bad.min_overlap=2.5", "arms.bad.min_overlap", "expects int, got 2.5"),
        ("+arms.bad.min_overlap=abc", "arms.bad.min_overlap", "expects int, got 'abc'"),
        ("arms.bm25.k1=abc", "arms.bm25.k1", "expects float, got 'abc'"),
        ("combiners.rrf.k=abc", "combiners.rrf.k", "expects int, got 'abc'"),
        # The job's weights are `retriever.weights`; a combiner node has no such key.
        ("+combiners.rrf.weights=[1,2]", "combiners.rrf.weights", "unknown key"),
    ],
)
def test_a_keyword_its_annotation_refuses_fails_at_the_config_check(
    tmp_path: Path, override: str, key: str, says: str
) -> None:
    used = "retriever.arms=[bad,bm25]" if "bm25" in key or "rrf" in key else "retriever.arms=[bad]"
    with pytest.raises(ConfigError) as refused:
        compose_config(faulty_arm(tmp_path, "", override, used))
    assert refused.value.key == key, str(refused.value)
    assert says in refused.value.message, str(refused.value)


def test_a_required_keyword_left_out_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as refused:
        compose_config(
            [
                *mini_overrides(tmp_path),
                "+arms.m3x._target_=retrieval_bench.retrievers.m3.M3Spec",
                "retriever.arms=[m3x]",
            ]
        )
    assert refused.value.key == "arms.m3x.mode", str(refused.value)


def test_keywords_reach_the_plugin_as_their_annotations_read_them(tmp_path: Path) -> None:
    """An int given for a float is the float; a list for a tuple the tuple."""
    from retrieval_bench.job.build import arm_spec, combiner_spec

    cfg = compose_config(faulty_arm(tmp_path, "", "+arms.bad.min_overlap=3"))
    spec = arm_spec("bad", cfg.arms["bad"])
    assert spec.min_overlap == 3  # type: ignore[attr-defined]
    rrf = combiner_spec("rrf", {"_target_": "retrieval_bench.fusion.rrf.ReciprocalRankFusion",
                                "weights": [1, 2]})  # fmt: skip
    assert rrf.weights == (1.0, 2.0)  # type: ignore[attr-defined]
