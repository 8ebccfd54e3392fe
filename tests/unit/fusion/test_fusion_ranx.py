"""Every combiner against ranx 0.3.21 (`ranx.fuse`), per (query, passage) score to 1e-9, on
random pools (ties, pools of different lengths, empty pools) and on the travel dataset's real
BM25 and dense pools. Where ranx defines no such method (weighted RRF, weighted CombMNZ) the
combiner is checked against its formula written out here.

RRF and ties: ranx re-sorts each run by score with an unstable sort, so the ranks it gives
tied passages are its sort's, not the project tie-break's; the RRF comparisons hand ranx each
pool with strictly decreasing scores in the pool's own order (its ranks are then the pool's),
and one comparison on tie-free pools hands ranx the raw scores.

ranx runs with numba's JIT off (`numba.config.DISABLE_JIT`, set before ranx is imported): its
`@njit` functions then run as the Python they are written in, the same arithmetic numba compiles,
and every comparison here is to 1e-9. With the JIT on, building the first `Run` and the first
`fuse` cost ~45 s of compiling in each process (numba's typed dicts are compiled anew every
time; its cache does not hold them), plus ~70 s on a fresh virtualenv: more than the comparisons.

ranx's zmuv and empty pools: in ranx 0.3.21 (numba 0.68) a run holding a query with no
results makes `zmuv_norm` return empty results for some later queries of that run (seen here
with 60 queries; not with a handful). So the z-score comparisons run on pools that are never
empty, and z-score over pools with empty ones is checked against its formula."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from conftest import run_in_process
from support.random_cases import Pools, random_pools

from retrieval_bench.fusion import ReciprocalRankFusion, ScoreFusion
from retrieval_bench.records import Ranked
from retrieval_bench.tiebreak import TieBreak

if TYPE_CHECKING:
    from ranx import Run

Scores = dict[str, dict[str, float]]  # query id -> passage id -> fused score

RANX_NORM = {"none": None, "minmax": "min-max", "zscore": "zmuv"}
RANX_METHOD = {"combsum": "sum", "combmnz": "mnz"}
# The tests that call ranx are marked slow: importing it (scipy.stats, pandas, pyplot) and
# running it uncompiled takes ~14 s, most of the fast tier's budget. The tests of the formulas
# ranx lacks need no ranx and stay fast.
RANX = pytest.mark.slow


def _uncompiled_ranx() -> None:
    """Turn numba's JIT off before ranx is first imported (module docstring). Only ranx uses
    numba in the test processes."""
    import numba

    numba.config.DISABLE_JIT = True


def fuse(runs: list[Run], **kwargs: Any) -> Run:
    """`ranx.fuse`, imported when first called."""
    _uncompiled_ranx()
    from ranx import fuse as ranx_fuse

    return ranx_fuse(runs, **kwargs)


def ranx_runs(pools: Pools, ids: Sequence[str], by_position: bool = False) -> list[Run]:
    """One ranx Run per arm; `by_position`: scores n, n-1, ... 1 in the pool's order."""
    _uncompiled_ranx()
    from ranx import Run

    runs = []
    for arm in range(len(pools[0])):
        run: Scores = {}
        for q, query_pools in enumerate(pools):
            pool = query_pools[arm]
            scores = (
                np.arange(pool.returned, 0, -1, dtype=np.float64) if by_position else pool.scores
            )
            run[f"q{q}"] = {ids[i]: float(s) for i, s in zip(pool.indices, scores, strict=True)}
        runs.append(Run.from_dict(run))
    return runs


def ours(combiner: ReciprocalRankFusion | ScoreFusion, pools: Pools, ids: Sequence[str]) -> Scores:
    tie_break = TieBreak(ids)
    fused = {}
    for q, query_pools in enumerate(pools):
        ranked = combiner.combine(query_pools, tie_break)
        assert (
            ranked.requested
            == ranked.returned
            == len(set(np.concatenate([p.indices for p in query_pools]).tolist()))
        )
        # the project tie-break: score descending, then id descending
        keys = [
            (-s, -tie_break.id_order[i]) for i, s in zip(ranked.indices, ranked.scores, strict=True)
        ]
        assert keys == sorted(keys)
        fused[f"q{q}"] = {
            ids[i]: float(s) for i, s in zip(ranked.indices, ranked.scores, strict=True)
        }
    return fused


def assert_same(got: Scores, expected: Scores) -> None:
    assert sorted(got) == sorted(expected)
    for q in expected:
        assert got[q].keys() == expected[q].keys(), q
        for pid, score in expected[q].items():
            assert abs(got[q][pid] - score) <= 1e-9, (q, pid, got[q][pid], score)


def by_hand(pools: Pools, ids: Sequence[str], contribution, weights, mnz: bool) -> Scores:  # type: ignore[no-untyped-def]
    """sum_i w_i * contribution_i(d) (times the count of arms holding d when `mnz`)."""
    fused: Scores = {}
    for q, query_pools in enumerate(pools):
        scores: dict[str, float] = {}
        counts: dict[str, int] = {}
        for pool, weight in zip(query_pools, weights, strict=True):
            values = contribution(pool)
            for i, value in zip(pool.indices.tolist(), values, strict=True):
                scores[ids[i]] = scores.get(ids[i], 0.0) + weight * value
                counts[ids[i]] = counts.get(ids[i], 0) + 1
        fused[f"q{q}"] = {p: s * (counts[p] if mnz else 1) for p, s in scores.items()}
    return fused


def minmax(pool: Ranked) -> list[float]:
    s = pool.scores.tolist()
    return [(x - min(s)) / max(max(s) - min(s), 1e-9) for x in s]


def zscore(pool: Ranked) -> list[float]:
    s = pool.scores.tolist()
    if not s:
        return []
    mean = sum(s) / len(s)
    std = (sum((x - mean) ** 2 for x in s) / len(s)) ** 0.5
    return [(x - mean) / max(std, 1e-9) for x in s]


IDS = [f"p{i:03d}" for i in range(120)]
CASES = [(seed, n_arms, ties) for seed, n_arms in ((1, 2), (2, 3)) for ties in (True, False)]


@RANX
@pytest.mark.parametrize(("seed", "n_arms", "ties"), CASES)
def test_rrf_agrees_with_ranx(seed: int, n_arms: int, ties: bool) -> None:
    pools = random_pools(seed, n_arms, IDS, ties)
    expected = fuse(ranx_runs(pools, IDS, by_position=True), norm=None, method="rrf").to_dict()
    assert_same(ours(ReciprocalRankFusion(k=60), pools, IDS), expected)
    if not ties:
        raw = fuse(ranx_runs(pools, IDS), norm=None, method="rrf", params={"k": 20}).to_dict()
        assert_same(ours(ReciprocalRankFusion(k=20), pools, IDS), raw)


@pytest.mark.parametrize(("seed", "n_arms", "ties"), CASES)
def test_weighted_rrf_is_its_formula(seed: int, n_arms: int, ties: bool) -> None:
    pools = random_pools(seed, n_arms, IDS, ties)
    weights = (0.3, 0.7, 1.5)[:n_arms]
    expected = by_hand(
        pools, IDS, lambda p: [1 / (60 + r) for r in range(1, p.returned + 1)], weights, False
    )
    assert_same(ours(ReciprocalRankFusion(60, weights), pools, IDS), expected)


@RANX
@pytest.mark.parametrize("normalize", ["none", "minmax", "zscore"])
@pytest.mark.parametrize("method", ["combsum", "combmnz"])
@pytest.mark.parametrize(("seed", "n_arms", "ties"), CASES)
def test_score_fusion_agrees_with_ranx(
    normalize: str, method: str, seed: int, n_arms: int, ties: bool
) -> None:
    pools = random_pools(seed, n_arms, IDS, ties, empty=normalize != "zscore")
    runs = ranx_runs(pools, IDS)
    expected = fuse(runs, norm=RANX_NORM[normalize], method=RANX_METHOD[method]).to_dict()
    assert_same(ours(ScoreFusion(normalize, method), pools, IDS), expected)


@RANX
@pytest.mark.parametrize("normalize", ["none", "minmax", "zscore"])
@pytest.mark.parametrize(("seed", "n_arms", "ties"), CASES)
def test_weighted_combsum_agrees_with_ranx_wsum(
    normalize: str, seed: int, n_arms: int, ties: bool
) -> None:
    pools = random_pools(seed, n_arms, IDS, ties, empty=normalize != "zscore")
    weights = (0.3, 0.7, 1.5)[:n_arms]
    expected = fuse(
        ranx_runs(pools, IDS),
        norm=RANX_NORM[normalize],
        method="wsum",
        params={"weights": list(weights)},
    ).to_dict()
    assert_same(ours(ScoreFusion(normalize, "combsum", weights), pools, IDS), expected)


@RANX
def test_weighted_combmnz_is_its_formula_not_ranx_wmnz() -> None:
    """count x sum w_i n_i(d): a weight scales its arm's scores, as in CombSUM. ranx's wmnz
    (sum of n_i(d)) x (sum of the present arms' weights) is another method; it gives other
    scores here, which is why the combiner is not called by its name."""
    pools = random_pools(7, 2, IDS, ties=False)
    weights = (0.3, 0.7)
    expected = by_hand(pools, IDS, minmax, weights, True)
    got = ours(ScoreFusion("minmax", "combmnz", weights), pools, IDS)
    assert_same(got, expected)
    wmnz = fuse(ranx_runs(pools, IDS), method="wmnz", params={"weights": list(weights)})
    with pytest.raises(AssertionError):
        assert_same(got, wmnz.to_dict())


@pytest.mark.parametrize("method", ["combsum", "combmnz"])
def test_zscore_over_pools_with_empty_ones_is_its_formula(method: str) -> None:
    pools = random_pools(3, 3, IDS, ties=True)
    assert any(not pool.returned for query_pools in pools for pool in query_pools)
    weights = (0.3, 0.7, 1.5)
    expected = by_hand(pools, IDS, zscore, weights, method == "combmnz")
    assert_same(ours(ScoreFusion("zscore", method, weights), pools, IDS), expected)


@RANX
def test_constant_and_single_passage_pools_agree_with_ranx() -> None:
    ids = IDS[:4]  # ids of one length, as elsewhere here: numba compiles ranx once per length
    tie_break = TieBreak(ids)
    flat = Ranked(*tie_break.top(np.array([0, 1, 2]), np.array([0.5, 0.5, 0.5]), 3), 3)
    single = Ranked(np.array([3]), np.array([2.0]), 3)
    mixed = Ranked(*tie_break.top(np.array([2, 3]), np.array([1.0, 4.0]), 2), 3)
    pools = [[flat, single], [single, mixed], [flat, mixed]]
    for normalize in ("minmax", "zscore"):
        for method in ("combsum", "combmnz"):
            expected = fuse(
                ranx_runs(pools, ids), norm=RANX_NORM[normalize], method=RANX_METHOD[method]
            ).to_dict()
            assert_same(ours(ScoreFusion(normalize, method), pools, ids), expected)


@pytest.mark.slow
def test_real_travel_arms_agree_with_ranx(tmp_path: Path, shared_cache: Path) -> None:
    """The travel set's BM25 and dense pools (100 deep; BM25's are shorter where few passages
    share a term) fused every way, against ranx."""
    result, _ = run_in_process(
        ["retriever=hybrid", "retriever.pool_size=100", f"cache_dir={shared_cache}"], tmp_path
    )
    ids = [p.id for p in result.dataset.passages]
    pools = [
        [
            Ranked(stage.indices, np.asarray(stage.scores), stage.pool_requested)
            for stage in (record.stages["bm25"], record.stages["dense"])
        ]
        for record in result.records
        if record.stages["bm25"].ids or record.stages["dense"].ids
    ]
    lengths = {len(pool.indices) for query_pools in pools for pool in query_pools}
    assert len(pools) > 100 and len(lengths) > 1
    ranks = ranx_runs(pools, ids, by_position=True)
    rrf = fuse(ranks, norm=None, method="rrf").to_dict()
    assert_same(ours(ReciprocalRankFusion(60), pools, ids), rrf)
    # z-score: the queries where both arms returned passages (see the module's docstring).
    full = [query_pools for query_pools in pools if all(p.returned for p in query_pools)]
    assert len(full) > 100
    for normalize in ("none", "minmax", "zscore"):
        chosen = full if normalize == "zscore" else pools
        runs = ranx_runs(chosen, ids)
        for method in ("combsum", "combmnz"):
            expected = fuse(runs, norm=RANX_NORM[normalize], method=RANX_METHOD[method])
            assert_same(ours(ScoreFusion(normalize, method), chosen, ids), expected.to_dict())
        wsum = fuse(runs, norm=RANX_NORM[normalize], method="wsum", params={"weights": [0.3, 0.7]})
        got = ours(ScoreFusion(normalize, "combsum", (0.3, 0.7)), chosen, ids)
        assert_same(got, wsum.to_dict())
