"""How well two raters agree on grades: Cohen's kappa, plain and weighted, and the confusion
matrix behind it. The model judge (`judge.calibrate`) is measured against people with these.

Cohen's kappa is (p_o - p_e) / (1 - p_e): the observed agreement beyond what two raters with
the same grade frequencies would reach by chance. Weighted kappa (Cohen 1968) counts a
disagreement by its distance on the grade scale instead of 0/1: 1 - sum(w * O) / sum(w * E),
O the observed and E the chance-expected (outer product of the margins) confusion matrices,
w[i][j] = |i - j| (linear) or (i - j)^2 (quadratic), i and j the positions of the grades on
the scale. With weights = none, w = 1 off the diagonal, which is Cohen's plain kappa.

These are scikit-learn's `cohen_kappa_score(a, b, labels=scale, weights=...)` definitions; the
tests check every variant against it. Written here rather than imported so the package does not
depend on scikit-learn for four lines of arithmetic.

Kappa is undefined (None, with the reason) when chance agreement is already perfect (both
raters give one and the same grade to every pair), and it cannot say anything when one rater
gives a single grade to every pair (it is then 0 whatever the other does): `kappa_note` says
which, and callers report "not estimated" rather than a number that reads as an answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

WEIGHTS = ("none", "linear", "quadratic")


def confusion(
    a: Sequence[int], b: Sequence[int], scale: Sequence[int], b_scale: Sequence[int] | None = None
) -> np.ndarray:
    """Counts of (a's grade, b's grade): rows a's grades in `scale` order, columns b's in
    `b_scale` order (default `scale`). A grade off its scale is a ValueError (it would
    silently drop a pair)."""
    columns = scale if b_scale is None else b_scale
    rows, cols = {g: i for i, g in enumerate(scale)}, {g: i for i, g in enumerate(columns)}
    out = np.zeros((len(scale), len(columns)), dtype=np.int64)
    for x, y in zip(a, b, strict=True):
        if x not in rows or y not in cols:
            raise ValueError(f"grade pair ({x}, {y}) is outside the scale {list(scale)}")
        out[rows[x], cols[y]] += 1
    return out


def cohen_kappa(
    a: Sequence[int], b: Sequence[int], scale: Sequence[int], weights: str = "none"
) -> float | None:
    """Cohen's kappa of raters `a` and `b` over `scale` (module docstring); None when it is
    undefined (no pair, or chance agreement is perfect)."""
    if weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {WEIGHTS}, got {weights!r}")
    observed = confusion(a, b, scale).astype(np.float64)
    total = observed.sum()
    if total == 0:
        return None
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0)) / total
    positions = np.arange(len(scale), dtype=np.float64)
    distance = np.abs(positions[:, None] - positions[None, :])
    w = {"none": (distance > 0).astype(np.float64), "linear": distance}.get(weights, distance**2)
    chance = float((w * expected).sum())
    if chance == 0:
        return None
    return 1.0 - float((w * observed).sum()) / chance


def kappa_note(a: Sequence[int], b: Sequence[int]) -> str | None:
    """Why a kappa of these ratings says nothing (module docstring), or None."""
    if not a:
        return "no pair"
    for name, grades in (("people", a), ("the judge", b)):
        distinct = sorted(set(grades))
        if len(distinct) == 1:
            return (
                f"{name} gave every pair grade {distinct[0]}: kappa cannot measure agreement "
                "(it needs pairs of more than one grade from each rater)"
            )
    return None


@dataclass(frozen=True)
class Agreement:
    """Two raters on one set of pairs: how many, the kappas (None when not estimated, with
    `note` saying why) and the confusion matrix (rows the first rater, columns the second)."""

    n: int
    kappa: float | None
    weighted_kappa: float | None
    weights: str
    confusion: list[list[int]]
    rows: list[int]
    columns: list[int]
    note: str | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "n": self.n,
            "kappa_binary": self.kappa,
            "kappa_weighted": self.weighted_kappa,
            "weights": self.weights,
            "confusion": {"rows": self.rows, "columns": self.columns, "counts": self.confusion},
            "note": self.note,
        }


def agreement(
    people: Sequence[int],
    judge: Sequence[int],
    scale: Sequence[int],
    judge_raw: Sequence[int] | None = None,
    raw_scale: Sequence[int] | None = None,
    weights: str = "quadratic",
    min_pairs: int = 30,
) -> Agreement:
    """People's grades against the judge's (both on `scale`): kappa on relevant (grade > 0)
    vs not, and kappa `weights`-weighted over the scale; not estimated under `min_pairs`
    pairs or when a rater gave one grade only. The confusion matrix is people's grade x the
    judge's raw grade (`judge_raw` on `raw_scale`, e.g. 0-3 before mapping), or x `judge`."""
    columns = list(raw_scale if judge_raw is not None and raw_scale is not None else scale)
    matrix = confusion(people, judge_raw if judge_raw is not None else judge, scale, columns)
    if len(people) < min_pairs:
        note: str | None = f"not estimated: {len(people)} labelled pairs (fewer than {min_pairs})"
    else:
        binary_people = [int(g > 0) for g in people]
        binary_judge = [int(g > 0) for g in judge]
        reason = kappa_note(binary_people, binary_judge)
        note = f"not estimated: {reason}" if reason else None
    kappa = weighted = None
    if note is None:
        kappa = cohen_kappa([int(g > 0) for g in people], [int(g > 0) for g in judge], (0, 1))
        weighted = cohen_kappa(people, judge, scale, weights)
    return Agreement(
        n=len(people),
        kappa=kappa,
        weighted_kappa=weighted,
        weights=weights,
        confusion=matrix.tolist(),
        rows=list(scale),
        columns=columns,
        note=note,
    )
