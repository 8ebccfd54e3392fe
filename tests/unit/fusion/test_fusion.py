"""The combiners (retrievers/fusion/): each formula against values worked by hand, the project
tie-break, `requested` as the union's size, the empty and single-pool cases, and the config
keys that choose them (typos and misfit weights refused, naming the key)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, built_combiners, compose_config, mini_overrides, run_in_process

from retrieval_bench.config import RetrieverConfig
from retrieval_bench.config.schema import BUILTIN_COMBINERS
from retrieval_bench.errors import ConfigError
from retrieval_bench.fusion import Fill, ReciprocalRankFusion, ScoreFusion, arm_weights
from retrieval_bench.records import Ranked
from retrieval_bench.tiebreak import TieBreak

IDS = ["a", "b", "c", "d", "e"]
TIE_BREAK = TieBreak(IDS)
# bm25-like: a 3.0, b 2.0, c 1.0; dense-like: b 0.9, d 0.8, a 0.5
FIRST = Ranked(np.array([0, 1, 2]), np.array([3.0, 2.0, 1.0]), requested=3)
SECOND = Ranked(np.array([1, 3, 0]), np.array([0.9, 0.8, 0.5]), requested=3)


def as_dict(ranked: Ranked) -> dict[str, float]:
    return {IDS[i]: s for i, s in zip(ranked.indices.tolist(), ranked.scores.tolist(), strict=True)}


def order(ranked: Ranked) -> list[str]:
    return [IDS[i] for i in ranked.indices.tolist()]


def test_weighted_rrf_is_the_weighted_sum_of_reciprocal_ranks() -> None:
    fused = ReciprocalRankFusion(k=60, weights=(0.3, 0.7)).combine([FIRST, SECOND], TIE_BREAK)
    assert as_dict(fused) == pytest.approx(
        {
            "a": 0.3 / 61 + 0.7 / 63,
            "b": 0.3 / 62 + 0.7 / 61,
            "c": 0.3 / 63,
            "d": 0.7 / 62,
        },
        abs=1e-15,
    )
    assert order(fused) == ["b", "a", "d", "c"]
    assert fused.requested == fused.returned == 4


def test_rrf_with_unit_weights_is_plain_rrf_bit_for_bit() -> None:
    plain = ReciprocalRankFusion(k=10).combine([FIRST, SECOND], TIE_BREAK)
    unit = ReciprocalRankFusion(k=10, weights=(1.0, 1.0)).combine([FIRST, SECOND], TIE_BREAK)
    assert (
        as_dict(plain)
        == as_dict(unit)
        == {
            "a": 1 / 11 + 1 / 13,
            "b": 1 / 12 + 1 / 11,
            "c": 1 / 13,
            "d": 1 / 12,
        }
    )


def test_minmax_combsum_by_hand() -> None:
    # first: a 1, b 0.5, c 0; second: b 1, d 0.75, a 0
    fused = ScoreFusion("minmax", "combsum").combine([FIRST, SECOND], TIE_BREAK)
    assert as_dict(fused) == pytest.approx({"a": 1.0, "b": 1.5, "c": 0.0, "d": 0.75}, abs=1e-15)
    assert order(fused) == ["b", "a", "d", "c"]
    assert fused.requested == 4


def test_minmax_combmnz_multiplies_by_the_arms_that_returned_the_passage() -> None:
    fused = ScoreFusion("minmax", "combmnz").combine([FIRST, SECOND], TIE_BREAK)
    # a is in both pools (2 x (1 + 0)), though its second score normalises to 0.
    assert as_dict(fused) == pytest.approx({"a": 2.0, "b": 3.0, "c": 0.0, "d": 0.75}, abs=1e-15)


def test_weighted_combsum_and_combmnz_scale_each_arm() -> None:
    weights = (0.3, 0.7)
    combsum = ScoreFusion("minmax", "combsum", weights).combine([FIRST, SECOND], TIE_BREAK)
    assert as_dict(combsum) == pytest.approx(
        {"a": 0.3, "b": 0.3 * 0.5 + 0.7, "c": 0.0, "d": 0.7 * 0.75}, abs=1e-15
    )
    combmnz = ScoreFusion("minmax", "combmnz", weights).combine([FIRST, SECOND], TIE_BREAK)
    assert as_dict(combmnz) == pytest.approx(
        {"a": 2 * 0.3, "b": 2 * (0.3 * 0.5 + 0.7), "c": 0.0, "d": 0.7 * 0.75}, abs=1e-15
    )


def test_an_arm_of_weight_zero_has_no_say_even_in_combmnz() -> None:
    fused = ScoreFusion("minmax", "combmnz", (1.0, 0.0)).combine([FIRST, SECOND], TIE_BREAK)
    assert as_dict(fused) == {"a": 1.0, "b": 0.5, "c": 0.0, "d": 0.0}
    # d, returned only by the weightless arm, stays in the union (after c by id descending).
    assert order(fused) == ["a", "b", "d", "c"]


def test_zscore_uses_the_population_standard_deviation() -> None:
    fused = ScoreFusion("zscore", "combsum").combine([FIRST, SECOND], TIE_BREAK)
    first = (np.array([3.0, 2.0, 1.0]) - 2.0) / np.sqrt(2 / 3)
    second_mean = (0.9 + 0.8 + 0.5) / 3
    deviations = np.array([0.9, 0.8, 0.5]) - second_mean
    second = deviations / np.sqrt((deviations**2).sum() / 3)
    assert as_dict(fused) == pytest.approx(
        {"a": first[0] + second[2], "b": first[1] + second[0], "c": first[2], "d": second[1]},
        abs=1e-12,
    )


def test_none_sums_the_raw_scores() -> None:
    fused = ScoreFusion("none", "combsum").combine([FIRST, SECOND], TIE_BREAK)
    assert as_dict(fused) == pytest.approx({"a": 3.5, "b": 2.9, "c": 1.0, "d": 0.8}, abs=1e-15)


@pytest.mark.parametrize("normalize", ["minmax", "zscore"])
def test_a_constant_pool_normalises_to_zero_but_still_counts_in_combmnz(normalize: str) -> None:
    """ranx's definition (a floor of 1e-9 on the range and the deviation): a pool whose scores
    are all equal, one passage included, carries no score information."""
    flat = Ranked(np.array([4, 3]), np.array([0.7, 0.7]), requested=2)
    single = Ranked(np.array([2]), np.array([5.0]), requested=2)
    combsum = ScoreFusion(normalize, "combsum").combine([flat, single], TIE_BREAK)
    assert as_dict(combsum) == {"e": 0.0, "d": 0.0, "c": 0.0}
    assert order(combsum) == ["e", "d", "c"]
    # e: counted twice, though the flat pool gives it 0 (minmax: e 1, c 0; zscore: e 1, c -1).
    other = Ranked(np.array([4, 2]), np.array([1.0, 0.5]), requested=2)
    combmnz = ScoreFusion(normalize, "combmnz").combine([flat, other], TIE_BREAK)
    low = 0.0 if normalize == "minmax" else -1.0
    assert as_dict(combmnz) == {"e": 2.0, "d": 0.0, "c": low}


def test_ties_are_broken_by_id_descending_in_every_combiner() -> None:
    first = Ranked(np.array([0, 1]), np.array([2.0, 1.0]), requested=2)
    second = Ranked(np.array([1, 0]), np.array([2.0, 1.0]), requested=2)
    for combiner in (ReciprocalRankFusion(60), ScoreFusion("minmax", "combsum")):
        fused = combiner.combine([first, second], TIE_BREAK)
        assert fused.scores[0] == fused.scores[1]
        assert order(fused) == ["b", "a"]


def test_fill_keeps_the_first_arm_then_fills_from_the_next() -> None:
    fused = Fill(k=60).combine([FIRST, SECOND], TIE_BREAK)
    assert order(fused) == ["a", "b", "c", "d"]
    assert fused.scores.tolist() == [1 / 61, 1 / 62, 1 / 63, 1 / 64]
    assert fused.requested == 4


@pytest.mark.parametrize(
    "combiner", [ReciprocalRankFusion(60, (0.5, 0.5)), ScoreFusion("zscore", "combmnz"), Fill(60)]
)
def test_a_single_pool_passes_through_and_empty_pools_say_why(combiner: object) -> None:
    assert combiner.combine([FIRST], TIE_BREAK) is FIRST  # type: ignore[attr-defined]
    empty = Ranked(np.empty(0, np.int64), np.empty(0), 10, "no_query_terms")
    filtered = Ranked(np.empty(0, np.int64), np.empty(0), 10, "filtered_out")
    both = combiner.combine([empty, filtered], TIE_BREAK)  # type: ignore[attr-defined]
    assert (both.returned, both.requested, both.empty_reason) == (
        0,
        0,
        "no_query_terms+filtered_out",
    )
    one = combiner.combine([empty, SECOND], TIE_BREAK)  # type: ignore[attr-defined]
    assert sorted(order(one)) == ["a", "b", "d"] and one.requested == 3


def test_the_built_combiners_read_their_nodes_and_the_retriever_weights() -> None:
    cfg = RetrieverConfig(arms=["bm25", "dense"], combine="score", weights=[0.3, 0.7])
    combiners = {
        **BUILTIN_COMBINERS,
        "score": {**BUILTIN_COMBINERS["score"], "normalize": "zscore", "method": "combmnz"},
    }
    built = built_combiners(cfg, combiners)
    assert built["score"] == ScoreFusion("zscore", "combmnz", (0.3, 0.7))
    assert built["rrf"] == ReciprocalRankFusion(60, (0.3, 0.7))
    assert built["fill"] == Fill(60)
    # A router strategy over some of the arms keeps their weights, by name.
    assert arm_weights(cfg, ["dense"]) == (0.7,)
    cfg.weights = []
    assert built_combiners(cfg)["rrf"] == ReciprocalRankFusion(60, None)
    assert sorted(BUILTIN_COMBINERS) == ["fill", "rrf", "score"]


def test_fill_follows_rrf_k_unless_set() -> None:
    cfg = compose_config(["combiners.rrf.k=20"])
    assert cfg.combiners["fill"]["k"] == 20
    cfg = compose_config(["combiners.rrf.k=20", "combiners.fill.k=5"])
    assert (cfg.combiners["rrf"]["k"], cfg.combiners["fill"]["k"]) == (20, 5)


def test_the_issue_example_composes() -> None:
    cfg = compose_config(
        [
            "retriever.combine=score",
            "combiners.score.normalize=minmax",
            "retriever.weights=[0.3,0.7]",
        ]
    )
    built = built_combiners(cfg.retriever, cfg.combiners)
    assert built["score"] == ScoreFusion("minmax", "combsum", (0.3, 0.7))


@pytest.mark.parametrize(
    ("override", "key", "says"),
    [
        ("retriever.combine=rfr", "retriever.combine", "did you mean 'rrf'?"),
        ("retriever.combine=scores", "retriever.combine", "did you mean 'score'?"),
        ("combiners.score.normalize=min-max", "combiners.score.normalize", "mean 'minmax'?"),
        ("combiners.score.normalize=zmuv", "combiners.score.normalize", "none, minmax, zscore"),
        ("combiners.score.method=combmz", "combiners.score.method", "did you mean 'combmnz'?"),
        ("combiners.rrf.k=ten", "combiners.rrf.k", "expects int"),
        ("+combiners.rrf.weights=[1,2]", "combiners.rrf.weights", "unknown key"),
        ("retriever.weights=[1.0]", "retriever.weights", "1 weights for 2 arms"),
        ("retriever.weights=[1,2,3]", "retriever.weights", "3 weights for 2 arms"),
        ("retriever.weights=[0.5,-0.1]", "retriever.weights[1]", "must be >= 0"),
        ("retriever.weights=[0,0]", "retriever.weights", "at least one weight must be positive"),
        ("retriever.weights=[1,inf]", "retriever.weights[1]", "finite"),
    ],
)
def test_bad_fusion_settings_are_refused_naming_the_key(override: str, key: str, says: str) -> None:
    with pytest.raises(ConfigError) as error:
        compose_config([override])
    assert error.value.key == key
    assert says in str(error.value)


def test_a_router_strategy_over_an_unweighted_arm_is_refused() -> None:
    cfg = RetrieverConfig(arms=["bm25"], weights=[1.0])
    with pytest.raises(ConfigError, match="no weight for arm 'dense'") as error:
        arm_weights(cfg, ["bm25", "dense"])
    assert error.value.key == "retriever.weights"


def test_the_registry_imports_nothing_heavy() -> None:
    """The config schema imports the registry to check names: it must stay light."""
    code = (
        "import sys, retrieval_bench.fusion; "
        "print(sorted(m for m in ('faiss', 'jieba', 'scipy', 'torch') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_weights_with_a_router_must_fit_its_strategies() -> None:
    cfg = compose_config(["router=rules", "retriever.weights=[0.3,0.7]"])
    assert cfg.retriever.weights == [0.3, 0.7]
    with pytest.raises(ConfigError, match=r"router strategy '\w+' fuses") as error:
        compose_config(["router=rules", "retriever.arms=[dense,bm25]", "retriever.weights=[1,2]"])
    assert error.value.key == "retriever.weights"


def test_a_job_fuses_with_the_configured_method_and_weights(
    tmp_path: Path, shared_cache: Path
) -> None:
    """Wiring: the fused stage of a job is weighted z-score CombMNZ of its arms' recorded pools,
    bm25 first as retriever.arms lists it."""
    overrides = [
        *mini_overrides(tmp_path),
        f"cache_dir={shared_cache}",
        "retriever.combine=score",
        "combiners.score.normalize=zscore",
        "combiners.score.method=combmnz",
        "retriever.weights=[0.25,2]",
    ]
    result, _ = run_in_process(overrides, tmp_path)
    checked = 0
    for record in result.records:
        pools = [record.stages["bm25"], record.stages["dense"]]
        expected: dict[str, float] = {}
        count: dict[str, int] = {}
        for stage, weight in zip(pools, (0.25, 2.0), strict=True):
            if not stage.ids:
                continue
            scores = np.asarray(stage.scores)
            normalised = (scores - scores.mean()) / max(scores.std(), 1e-9)
            for pid, value in zip(stage.ids, normalised.tolist(), strict=True):
                expected[pid] = expected.get(pid, 0.0) + weight * value
                count[pid] = count.get(pid, 0) + 1
        fused = record.stages["fused"]
        got = dict(zip(fused.ids, fused.scores, strict=True))
        assert got == pytest.approx({p: s * count[p] for p, s in expected.items()}, abs=1e-12)
        assert fused.pool_requested == len(expected)
        checked += len(expected) > 0
    assert checked > 5


def test_a_router_strategy_with_a_misspelt_combiner_names_the_nearest() -> None:
    with pytest.raises(ConfigError, match="unknown combiner 'scor'; did you mean 'score'") as error:
        compose_config(["router=rules", "router.strategies.hybrid.combine=scor"])
    assert error.value.key == "router.strategies.hybrid.combine"
