"""A router learned from labelled queries: for each query, the predicted gain of every candidate
strategy over a reference one, from the query's features (routing.features); the query takes
the candidate with the largest predicted gain when that gain exceeds a margin, else the
reference.

Why gains over a reference, and a margin: per-query differences between strategies are small
and mostly zero, so a router that departs from the best fixed strategy on weak evidence loses
to it on unseen queries (the "routing paradox"). The reference is the candidate with the best
mean on the training queries (what a team without a router would ship); the margin, chosen
with the model, says how sure a departure must be.

- Target: `utilities[i, c]`, query i's value of the chosen metric under candidate c; the model
  regresses `utilities[:, c] - utilities[:, reference]` for every c at once.
- Models (scikit-learn): `ridge` (features standardised, then ridge regression) and `forest`
  (a random forest of regression trees). Which family, its setting (ridge's `alpha`, the
  forest's `min_samples_leaf`) and the margin are chosen by K-fold cross-validation inside the
  training queries only (`select`), folds stratified by query type (`ceiling.assign_folds`),
  on the mean utility of the choices on each inner held-out fold.
- `cross_fit`: the honest estimate. Each outer fold's queries are routed by a model selected
  and fitted on the other folds only, so no query's choice was learned from its own label.

A fitted router is stored as plain numbers, not a pickle (`RouterModel.to_json`): the
standardisation and coefficients of a ridge model, every tree's arrays of a forest (children,
split feature and threshold, leaf values), which `predict` evaluates as scikit-learn does
(tests compare both). The scikit-learn version that fitted it is recorded for the record only:
nothing of scikit-learn is needed to apply it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from retrieval_bench.errors import DataError
from retrieval_bench.routing.ceiling import assign_folds

FORMAT = "retrieval-bench learned router"
VERSION = 1
ESTIMATORS = ("ridge", "forest")
# Each family's one searched setting.
SETTING = {"ridge": "alpha", "forest": "min_samples_leaf"}
FOREST_TREES = 100
# Share of the features each split of a forest's tree may look at.
FOREST_MAX_FEATURES = 0.33


@dataclass(frozen=True)
class Candidate:
    """A strategy the router may choose: its arms, combiner, whether the parsed exclusions go
    to the filter first, and (soft routing) the per-arm RRF weights."""

    name: str
    arms: tuple[str, ...]
    combine: str = "rrf"
    exclude: bool = False
    weights: tuple[float, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "arms": list(self.arms),
            "combine": self.combine,
            "exclude": self.exclude,
            "weights": None if self.weights is None else list(self.weights),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Candidate:
        weights = data.get("weights")
        return cls(
            name=str(data["name"]),
            arms=tuple(str(a) for a in data["arms"]),
            combine=str(data["combine"]),
            exclude=bool(data["exclude"]),
            weights=None if weights is None else tuple(float(w) for w in weights),
        )


@dataclass(frozen=True)
class RidgeGains:
    """Standardised features times coefficients: gain[c] = ((x - mean) / scale) . coef[c] +
    intercept[c] (scikit-learn's StandardScaler then Ridge)."""

    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray  # (candidates, features)
    intercept: np.ndarray  # (candidates,)

    def predict(self, x: np.ndarray) -> np.ndarray:
        return ((x - self.mean) / self.scale) @ self.coef.T + self.intercept

    def importances(self) -> np.ndarray:
        """Mean |standardised coefficient| over the candidates, summing to 1 (0s if none)."""
        weight = np.abs(self.coef).mean(axis=0)
        return weight / weight.sum() if weight.sum() > 0 else weight

    def to_json(self) -> dict[str, Any]:
        return {
            "mean": self.mean.tolist(),
            "scale": self.scale.tolist(),
            "coef": self.coef.tolist(),
            "intercept": self.intercept.tolist(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RidgeGains:
        return cls(
            np.asarray(data["mean"], dtype=np.float64),
            np.asarray(data["scale"], dtype=np.float64),
            np.asarray(data["coef"], dtype=np.float64).reshape(len(data["coef"]), -1),
            np.asarray(data["intercept"], dtype=np.float64),
        )


@dataclass(frozen=True)
class Tree:
    """One regression tree as scikit-learn's `tree_` arrays: node i splits on `feature[i]` at
    `threshold[i]` (x <= threshold, compared in float32 as scikit-learn does, goes to
    `left[i]`, else `right[i]`); a leaf has left = -1 and predicts `value[i]` (one value per
    candidate). `ForestGains.predict` walks them."""

    left: np.ndarray
    right: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    value: np.ndarray  # (nodes, candidates)

    def to_json(self) -> dict[str, Any]:
        return {
            "left": self.left.tolist(),
            "right": self.right.tolist(),
            "feature": self.feature.tolist(),
            "threshold": self.threshold.tolist(),
            "value": self.value.tolist(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Tree:
        value = np.asarray(data["value"], dtype=np.float64)
        return cls(
            np.asarray(data["left"], dtype=np.int64),
            np.asarray(data["right"], dtype=np.int64),
            np.asarray(data["feature"], dtype=np.int64),
            np.asarray(data["threshold"], dtype=np.float64),
            value.reshape(len(data["value"]), -1),
        )


@dataclass(frozen=True)
class ForestGains:
    """The mean of the trees' predictions (scikit-learn's RandomForestRegressor)."""

    trees: tuple[Tree, ...]
    # scikit-learn's impurity-based importances (mean decrease in impurity), summing to 1.
    mdi: np.ndarray

    @cached_property
    def _stacked(self) -> tuple[np.ndarray, ...]:
        """Every tree's arrays end to end (children offset into the whole), and each root."""
        sizes = [len(t.left) for t in self.trees]
        roots = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        left = np.concatenate(
            [np.where(t.left >= 0, t.left + r, -1) for t, r in zip(self.trees, roots, strict=True)]
        )
        right = np.concatenate(
            [
                np.where(t.right >= 0, t.right + r, -1)
                for t, r in zip(self.trees, roots, strict=True)
            ]
        )
        feature = np.concatenate([t.feature for t in self.trees])
        threshold = np.concatenate([t.threshold for t in self.trees])
        value = np.concatenate([t.value for t in self.trees])
        return roots, left, right, np.maximum(feature, 0), threshold, value

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Every tree walked at once (one step of every unfinished walk per round, as deep as
        the deepest tree), then the trees' values added in tree order and divided by their
        number, as scikit-learn adds them."""
        x32 = np.asarray(x, dtype=np.float32)
        roots, left, right, feature, threshold, value = self._stacked
        node = np.tile(roots, (len(x32), 1))
        while True:
            rows, cols = np.nonzero(left[node] >= 0)
            if not len(rows):
                break
            at = node[rows, cols]
            go_left = x32[rows, feature[at]] <= threshold[at]
            node[rows, cols] = np.where(go_left, left[at], right[at])
        # (rows, trees, candidates); cumsum adds in tree order, one tree after another
        total = value[node].cumsum(axis=1)[:, -1]
        return total / len(self.trees)

    def importances(self) -> np.ndarray:
        return self.mdi

    def to_json(self) -> dict[str, Any]:
        return {"trees": [t.to_json() for t in self.trees], "mdi": self.mdi.tolist()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ForestGains:
        return cls(
            tuple(Tree.from_json(t) for t in data["trees"]),
            np.asarray(data["mdi"], dtype=np.float64),
        )


Gains = RidgeGains | ForestGains


def fit_gains(kind: str, setting: float, x: np.ndarray, gains: np.ndarray, seed: int) -> Gains:
    """Fit one family at one setting on (features, gains per candidate)."""
    if kind == "ridge":
        from sklearn.linear_model import Ridge
        from sklearn.preprocessing import StandardScaler

        scaler = StandardScaler().fit(x)
        ridge = Ridge(alpha=float(setting)).fit(scaler.transform(x), gains)
        return RidgeGains(
            np.asarray(scaler.mean_, dtype=np.float64),
            np.asarray(scaler.scale_, dtype=np.float64),
            np.asarray(ridge.coef_, dtype=np.float64).reshape(gains.shape[1], -1),
            np.asarray(ridge.intercept_, dtype=np.float64).reshape(gains.shape[1]),
        )
    if kind == "forest":
        from sklearn.ensemble import RandomForestRegressor

        forest = RandomForestRegressor(
            n_estimators=FOREST_TREES,
            min_samples_leaf=int(setting),
            max_features=FOREST_MAX_FEATURES,
            random_state=seed,
            n_jobs=-1,  # every core; the fitted forest does not depend on it
        ).fit(x, gains)
        trees = tuple(
            Tree(
                np.asarray(t.tree_.children_left, dtype=np.int64),
                np.asarray(t.tree_.children_right, dtype=np.int64),
                np.asarray(t.tree_.feature, dtype=np.int64),
                np.asarray(t.tree_.threshold, dtype=np.float64),
                np.asarray(t.tree_.value, dtype=np.float64).reshape(t.tree_.node_count, -1),
            )
            for t in forest.estimators_
        )
        return ForestGains(trees, np.asarray(forest.feature_importances_, dtype=np.float64))
    raise ValueError(f"unknown estimator {kind!r}")


def reference_of(utilities: np.ndarray) -> int:
    """The candidate with the best mean utility (ties: the first)."""
    return int(np.argmax(utilities.mean(axis=0)))


def choose(predicted: np.ndarray, reference: int, margin: float) -> np.ndarray:
    """Per row, the candidate of largest predicted gain when it exceeds `margin`, else the
    reference."""
    best = np.argmax(predicted, axis=1)
    gain = predicted[np.arange(len(predicted)), best]
    return np.where(gain > margin, best, reference)


@dataclass(frozen=True)
class Choice:
    """A model family at one setting, with the margin: one point of the search."""

    estimator: str
    setting: float
    margin: float

    def to_json(self) -> dict[str, Any]:
        return {
            "estimator": self.estimator,
            SETTING[self.estimator]: self.setting,
            "margin": self.margin,
        }


def search_points(grid: Mapping[str, Sequence[float]]) -> list[tuple[str, float]]:
    """(family, setting) pairs of `grid` (family -> settings), in order."""
    return [(kind, float(s)) for kind, settings in grid.items() for s in settings]


@dataclass
class Selection:
    """What the inner cross-validation chose, and each point's inner score."""

    choice: Choice
    score: float
    scores: list[dict[str, Any]] = field(default_factory=list)


def select(
    x: np.ndarray,
    utilities: np.ndarray,
    types: Sequence[str],
    grid: Mapping[str, Sequence[float]],
    margins: Sequence[float],
    folds: int,
    seed: int,
) -> Selection:
    """The family, setting and margin with the best mean utility of their choices over inner
    held-out folds of these queries (folds stratified by type); ties keep the earlier family
    and setting and the larger margin. Each (family, setting) is fitted once per fold; every
    margin is scored on the same predictions."""
    fold_of = assign_folds({str(i): t for i, t in enumerate(types)}, folds, seed)
    fold = np.array([fold_of[str(i)] for i in range(len(types))])
    splits = [(np.flatnonzero(fold != f), np.flatnonzero(fold == f)) for f in range(folds)]
    splits = [(train, test) for train, test in splits if len(test) and len(train)]
    ordered = sorted({float(m) for m in margins}, reverse=True)
    best: Selection | None = None
    scores = []
    for kind, setting in search_points(grid):
        chosen = {m: np.empty(0) for m in ordered}
        for train, test in splits:
            reference = reference_of(utilities[train])
            gains = utilities[train] - utilities[train][:, [reference]]
            predicted = fit_gains(kind, setting, x[train], gains, seed).predict(x[test])
            for m in ordered:
                picks = choose(predicted, reference, m)
                chosen[m] = np.concatenate([chosen[m], utilities[test, picks]])
        for m in ordered:
            score = float(chosen[m].mean())
            scores.append({**Choice(kind, setting, m).to_json(), "score": score})
            if best is None or score > best.score:
                best = Selection(Choice(kind, setting, m), score)
    assert best is not None, "an empty search grid is refused by the config check"
    best.scores = scores
    return best


@dataclass(frozen=True)
class RouterModel:
    """A fitted router: what it reads (feature names, arms), what it chooses among, and how."""

    features: tuple[str, ...]
    arms: tuple[str, ...]
    candidates: tuple[Candidate, ...]
    reference: int
    choice: Choice
    gains: Gains
    metric: str
    trained_on: dict[str, Any]
    inner_score: float | None = None
    sklearn: str = ""

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Each row's predicted gain per candidate over the reference."""
        return self.gains.predict(np.asarray(x, dtype=np.float64))

    def choose(self, x: np.ndarray) -> np.ndarray:
        """Each row's candidate index."""
        return choose(self.predict(x), self.reference, self.choice.margin)

    def importances(self) -> dict[str, float]:
        return dict(zip(self.features, self.gains.importances().tolist(), strict=True))

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "sklearn": self.sklearn,
            "metric": self.metric,
            "features": list(self.features),
            "arms": list(self.arms),
            "candidates": [c.to_json() for c in self.candidates],
            "reference": self.candidates[self.reference].name,
            "choice": self.choice.to_json(),
            "inner_score": self.inner_score,
            "trained_on": self.trained_on,
            "gains": self.gains.to_json(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RouterModel:
        """Back from `to_json`; a malformed document raises KeyError, ValueError or
        TypeError (`load_model` names the file)."""
        if data.get("format") != FORMAT:
            raise ValueError(f"not a learned router (format {data.get('format')!r})")
        if data.get("version") != VERSION:
            raise ValueError(
                f"router format version {data.get('version')!r}; this release reads {VERSION}"
            )
        candidates = tuple(Candidate.from_json(c) for c in data["candidates"])
        names = [c.name for c in candidates]
        choice = data["choice"]
        estimator = str(choice["estimator"])
        if estimator not in ESTIMATORS:
            raise ValueError(f"unknown estimator {estimator!r}")
        gains: Gains = (
            RidgeGains.from_json(data["gains"])
            if estimator == "ridge"
            else ForestGains.from_json(data["gains"])
        )
        model = cls(
            features=tuple(str(f) for f in data["features"]),
            arms=tuple(str(a) for a in data["arms"]),
            candidates=candidates,
            reference=names.index(str(data["reference"])),
            choice=Choice(estimator, float(choice[SETTING[estimator]]), float(choice["margin"])),
            gains=gains,
            metric=str(data["metric"]),
            trained_on=dict(data["trained_on"]),
            inner_score=data.get("inner_score"),
            sklearn=str(data.get("sklearn", "")),
        )
        probe = model.predict(np.zeros((1, len(model.features))))
        if probe.shape != (1, len(candidates)):
            raise ValueError(
                f"the model predicts {probe.shape[1]} values for {len(candidates)} candidates"
            )
        return model


def sklearn_version() -> str:
    import sklearn

    return str(sklearn.__version__)


def fit_router(
    x: np.ndarray,
    utilities: np.ndarray,
    types: Sequence[str],
    features: Sequence[str],
    arms: Sequence[str],
    candidates: Sequence[Candidate],
    grid: Mapping[str, Sequence[float]],
    margins: Sequence[float],
    inner_folds: int,
    seed: int,
    metric: str,
    trained_on: Mapping[str, Any],
) -> RouterModel:
    """Select (inner cross-validation on these queries) and fit a router on all of them."""
    selection = select(x, utilities, types, grid, margins, inner_folds, seed)
    reference = reference_of(utilities)
    gains = utilities - utilities[:, [reference]]
    choice = selection.choice
    fitted = fit_gains(choice.estimator, choice.setting, x, gains, seed)
    return RouterModel(
        features=tuple(features),
        arms=tuple(arms),
        candidates=tuple(candidates),
        reference=reference,
        choice=choice,
        gains=fitted,
        metric=metric,
        trained_on=dict(trained_on),
        inner_score=selection.score,
        sklearn=sklearn_version(),
    )


@dataclass
class CrossFit:
    """The held-out routing: each query's candidate index chosen by its fold's model, and
    what each fold's inner search chose."""

    choices: np.ndarray
    folds: list[dict[str, Any]]


def cross_fit(
    x: np.ndarray,
    utilities: np.ndarray,
    types: Sequence[str],
    fold: np.ndarray,
    grid: Mapping[str, Sequence[float]],
    margins: Sequence[float],
    inner_folds: int,
    seed: int,
) -> CrossFit:
    """Each outer fold routed by a router selected and fitted on the other folds only."""
    choices = np.full(len(types), -1, dtype=np.int64)
    report = []
    for f in sorted(set(fold.tolist())):
        train, test = np.flatnonzero(fold != f), np.flatnonzero(fold == f)
        selection = select(
            x[train],
            utilities[train],
            [types[int(i)] for i in train],
            grid,
            margins,
            inner_folds,
            seed,
        )
        reference = reference_of(utilities[train])
        gains = utilities[train] - utilities[train][:, [reference]]
        choice = selection.choice
        model = fit_gains(choice.estimator, choice.setting, x[train], gains, seed)
        choices[test] = choose(model.predict(x[test]), reference, choice.margin)
        report.append(
            {
                "fold": int(f),
                "train": len(train),
                "test": len(test),
                "reference": int(reference),
                "choice": choice.to_json(),
                "inner_score": selection.score,
                "test_score": float(utilities[test, choices[test]].mean()),
            }
        )
    return CrossFit(choices, report)


def load_model(path: Path) -> RouterModel:
    """A saved router (`router.json` of a finished job); a file that is not one fails with
    DataError naming it."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise DataError(path, f"cannot read the saved router: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise DataError(path, f"not valid JSON: {exc.msg}", exc.lineno) from exc
    if not isinstance(data, dict):
        raise DataError(path, "a saved router is a JSON object")
    try:
        return RouterModel.from_json(data)
    except KeyError as exc:
        raise DataError(path, f"not a saved router: missing {exc}") from None
    except (TypeError, ValueError) as exc:
        raise DataError(path, f"not a saved router: {exc}") from None


def finite_rows(x: np.ndarray) -> np.ndarray:
    """Rows whose every feature is a finite number (a feature that could not be computed is
    NaN here)."""
    return np.all(np.isfinite(x), axis=1) if x.size else np.ones(len(x), dtype=bool)


def as_matrix(features: Sequence[Mapping[str, float | None]], names: Sequence[str]) -> np.ndarray:
    """Feature dicts as a (queries, features) matrix in `names` order; None -> NaN."""
    out = np.full((len(features), len(names)), math.nan)
    for i, row in enumerate(features):
        for j, name in enumerate(names):
            value = row.get(name)
            if value is not None:
                out[i, j] = value
    return out
