"""The learned router's model: stored ridge and forest models predict what scikit-learn's
fitted objects predict; the inner search picks the family and margin that route best on
held-out inner folds; the cross-fit routes each fold without its labels; a saved model round-
trips and a file that is not one is refused naming it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from retrieval_bench.errors import DataError
from retrieval_bench.routing.learned import (
    Candidate,
    Choice,
    RouterModel,
    as_matrix,
    choose,
    cross_fit,
    finite_rows,
    fit_gains,
    fit_router,
    load_model,
    reference_of,
    select,
)

CANDIDATES = (
    Candidate("bm25", ("bm25",)),
    Candidate("dense", ("dense",)),
    Candidate("hybrid", ("bm25", "dense")),
)


def learnable(n: int = 120, seed: int = 0) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Feature 0 > 0 makes candidate 1 the best (0.9 against 0), otherwise candidate 0 (0.9
    against 0.3); candidate 2 always gives 0.5. Features 1-2 are noise. Candidate 1 is the best
    fixed strategy (~0.6); routing on feature 0 gives 0.9."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3))
    u = np.zeros((n, 3))
    signal = x[:, 0] > 0
    u[:, 0] = np.where(signal, 0.0, 0.9)
    u[:, 1] = np.where(signal, 0.9, 0.3)
    u[:, 2] = 0.5
    types = ["a" if i % 2 else "b" for i in range(n)]
    return x, u, types


def toy_router(
    n: int, grid: dict[str, list[float]], candidates: tuple[Candidate, ...] = CANDIDATES
) -> RouterModel:
    """A router fitted on `learnable(n)` over features f0-f2, margin 0."""
    x, u, types = learnable(n)
    features, arms = ["f0", "f1", "f2"], ["bm25", "dense"]
    trained_on = {"dataset": "toy", "queries": n}
    return fit_router(
        x, u, types, features, arms, candidates, grid, [0.0], 3, 0, "ndcg@6", trained_on
    )


def test_stored_ridge_predicts_as_scikit_learn() -> None:
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(40, 5)) * [1, 10, 100, 0.1, 3], rng.normal(size=(40, 3))
    ours = fit_gains("ridge", 3.0, x, y, seed=0)
    reference = make_pipeline(StandardScaler(), Ridge(alpha=3.0)).fit(x, y)
    probe = rng.normal(size=(25, 5))
    np.testing.assert_allclose(ours.predict(probe), reference.predict(probe), rtol=0, atol=1e-12)


def test_stored_forest_predicts_exactly_as_scikit_learn() -> None:
    from sklearn.ensemble import RandomForestRegressor

    from retrieval_bench.routing.learned import FOREST_MAX_FEATURES, FOREST_TREES

    rng = np.random.default_rng(2)
    x, y = rng.normal(size=(60, 4)), rng.normal(size=(60, 3))
    ours = fit_gains("forest", 3, x, y, seed=7)
    reference = RandomForestRegressor(
        n_estimators=FOREST_TREES,
        min_samples_leaf=3,
        max_features=FOREST_MAX_FEATURES,
        random_state=7,
    ).fit(x, y)
    probe = np.vstack([rng.normal(size=(30, 4)), x[:10]])
    np.testing.assert_array_equal(ours.predict(probe), reference.predict(probe))
    np.testing.assert_array_equal(ours.importances(), reference.feature_importances_)


def test_choose_departs_from_the_reference_only_beyond_the_margin() -> None:
    predicted = np.array([[0.0, 0.05, -0.1], [0.0, 0.2, 0.3], [0.0, -0.1, -0.2]])
    assert choose(predicted, reference=0, margin=0.0).tolist() == [1, 2, 0]
    assert choose(predicted, reference=0, margin=0.1).tolist() == [0, 2, 0]
    # A gain equal to the margin does not exceed it: the reference stays.
    assert choose(np.array([[0.0, 0.25, 0.0]]), reference=2, margin=0.25).tolist() == [2]
    assert reference_of(np.array([[1.0, 0.0], [0.0, 1.0]])) == 0  # a tie: the first


def test_the_inner_search_finds_a_signal_a_fixed_strategy_misses() -> None:
    x, u, types = learnable()
    selection = select(x, u, types, {"ridge": [1.0, 100.0], "forest": [5]}, [0.0, 0.05], 3, 0)
    assert reference_of(u) == 1
    assert u[:, 1].mean() == pytest.approx(0.6, abs=0.05)
    assert selection.score > 0.8
    assert len(selection.scores) == 3 * 2
    assert {s["estimator"] for s in selection.scores} == {"ridge", "forest"}


def test_without_a_signal_the_search_keeps_the_reference() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(90, 3))
    u = np.column_stack([np.full(90, 0.5), rng.choice([0.3, 0.6], size=90)])  # noise, mean .45
    types = ["t"] * 90
    model = fit_router(
        x,
        u,
        types,
        ["f0", "f1", "f2"],
        ["bm25", "dense"],
        CANDIDATES[:2],
        {"ridge": [1000.0]},
        [0.0, 0.5],
        3,
        0,
        "ndcg@6",
        {"queries": 90},
    )
    assert model.choice.margin == 0.5
    assert set(model.choose(rng.normal(size=(50, 3))).tolist()) == {0}


def test_cross_fit_routes_each_fold_without_its_own_labels() -> None:
    x, u, types = learnable(90)
    fold = np.arange(90) % 3
    grid, margins = {"ridge": [1.0, 1000.0]}, [0.0, 0.3]
    first = cross_fit(x, u, types, fold, grid, margins, 3, 0)
    # Fold 1's labels changed so much that, were they read, they would move the reference
    # (candidate 2 best on all queries) and the search (a gain everywhere, for candidate 2).
    scrambled = u.copy()
    scrambled[fold == 1] = [0.0, 0.0, 10.0]
    assert reference_of(scrambled) == 2 != reference_of(u)
    second = cross_fit(x, scrambled, types, fold, grid, margins, 3, 0)
    # Fold 1's choices come from folds 0 and 2, whose labels did not change.
    assert first.choices[fold == 1].tolist() == second.choices[fold == 1].tolist()
    for key in ("reference", "choice", "inner_score"):
        assert first.folds[1][key] == second.folds[1][key], key
    assert [f["test"] for f in first.folds] == [30, 30, 30]
    assert (first.choices >= 0).all()
    held_out = u[np.arange(90), first.choices].mean()
    assert held_out > u[:, reference_of(u)].mean() + 0.2


@pytest.mark.parametrize("family", ["ridge", "forest"])
def test_a_saved_router_round_trips(tmp_path: Path, family: str) -> None:
    model = toy_router(60, {family: [3.0]})
    path = tmp_path / "router.json"
    path.write_text(json.dumps(model.to_json()))
    back = load_model(path)
    probe = np.random.default_rng(4).normal(size=(20, 3))
    np.testing.assert_array_equal(back.predict(probe), model.predict(probe))
    assert back.candidates == CANDIDATES
    assert back.choice == Choice(family, 3.0, 0.0)
    assert back.features == ("f0", "f1", "f2")
    assert back.trained_on == {"dataset": "toy", "queries": 60}
    assert back.sklearn and set(back.importances()) == {"f0", "f1", "f2"}


def test_a_file_that_is_no_saved_router_is_refused_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "router.json"
    bad.write_text("{not json")
    with pytest.raises(DataError, match=r"router\.json:1: not valid JSON"):
        load_model(bad)
    bad.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(DataError, match="not a learned router"):
        load_model(bad)
    model = toy_router(30, {"ridge": [1.0]})
    document = model.to_json()
    document["version"] = 99
    bad.write_text(json.dumps(document))
    with pytest.raises(DataError, match="version 99"):
        load_model(bad)
    del document["gains"]
    document["version"] = 1
    bad.write_text(json.dumps(document))
    with pytest.raises(DataError, match="missing 'gains'"):
        load_model(bad)
    with pytest.raises(DataError, match="cannot read"):
        load_model(tmp_path / "absent.json")


def test_features_become_a_matrix_with_missing_ones_as_nan() -> None:
    x = as_matrix([{"a": 1.0, "b": None}, {"a": 2.0, "b": 3.0}], ["a", "b"])
    assert np.isnan(x[0, 1]) and x[1].tolist() == [2.0, 3.0]
    assert finite_rows(x).tolist() == [False, True]


def test_a_router_model_reads_its_own_candidates() -> None:
    assert RouterModel.from_json  # the class method used by load_model
    assert Candidate.from_json(CANDIDATES[2].to_json()) == CANDIDATES[2]
    weighted = Candidate("rrf[0.25,0.75]", ("bm25", "dense"), "rrf[0.25,0.75]", True, (0.25, 0.75))
    assert Candidate.from_json(weighted.to_json()) == weighted
