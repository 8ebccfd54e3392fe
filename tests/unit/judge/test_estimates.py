"""The three estimates with a judge's labels, from per-query values (no job): PPI worked by hand
over the same queries as people's estimate, with the n it used, one variance convention (ddof
1), the judge's unscored queries predicted under people's plus the judge's labels; and a set of
one query type, whose rows and `all` are one estimate in the correction.

The same estimates from the stored rankings of real jobs: tests/unit/judge/test_judge.py
(slow)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from retrieval_bench.config.compare import CompareConfig
from retrieval_bench.judge.estimates import ESTIMATES, MIXED, PEOPLE, PPI, judged_metrics
from retrieval_bench.stats.corrections import holm
from retrieval_bench.stats.settings import SignificanceSettings

CFG = CompareConfig(metrics=["ndcg@K"], min_queries=2)
SIG = SignificanceSettings()
Z = 1.959963984540054  # the 97.5% normal quantile

# 12 queries, types x (even) and y (odd). People's labels leave q11 nothing relevant (so it
# is unscored there); the judge's leave q00 and q03 nothing relevant; people's plus the
# judge's score every query. Six have every top-K passage labelled and graded.
QUERIES = [f"q{i:02d}" for i in range(12)]
TYPES = {q: "x" if i % 2 == 0 else "y" for i, q in enumerate(QUERIES)}
LABELLED = {"q01", "q02", "q04", "q05", "q08", "q10"}
RNG = np.random.default_rng(35)
VALUES = {
    job: {
        PEOPLE: {q: float(RNG.uniform(0, 1)) for q in QUERIES if q != "q11"},
        MIXED: {q: float(RNG.uniform(0, 1)) for q in QUERIES},
        PPI: {q: float(RNG.uniform(0, 1)) for q in QUERIES if q not in ("q00", "q03")},
    }
    for job in ("A", "B")
}


def by_type(values: dict[str, float], types: dict[str, str]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {"all": dict(values)}
    for q, v in values.items():
        out.setdefault(types[q], {})[q] = v
    return out


def per(types: dict[str, str]) -> dict:  # type: ignore[type-arg]
    return {
        "ndcg@K": {
            job: {name: by_type(VALUES[job][name], types) for name in ESTIMATES} for job in VALUES
        }
    }


def ppi_by_hand(y: dict[str, float], judge: dict[str, float], mixed: dict[str, float]) -> dict:  # type: ignore[type-arg]
    """The published estimate (Angelopoulos et al. 2023) over people's queries `y`: f the
    judge's value, else people's plus the judge's; Y on the labelled ones."""

    def f(q: str) -> float:
        return judge[q] if q in judge else mixed[q]

    units = [q for q in y if q in LABELLED]
    rest = [q for q in y if q not in LABELLED]
    rectifier = np.array([f(q) - y[q] for q in units])
    predicted = np.array([f(q) for q in rest])
    theta = predicted.mean() - rectifier.mean()
    se = math.sqrt(predicted.var(ddof=1) / len(rest) + rectifier.var(ddof=1) / len(units))
    return {"mean": theta, "se": se, "n": len(units), "n_predicted": len(rest)}


def test_ppi_by_hand_over_peoples_queries_with_the_n_it_used() -> None:
    metrics, _ = judged_metrics(per(TYPES), LABELLED, ["x", "y", "all"], CFG, SIG)
    [entry] = metrics
    for t in ("x", "y", "all"):
        for job in ("A", "B"):
            means = entry["types"][t]["means"][job]
            y = {q: v for q, v in VALUES[job][PEOPLE].items() if t in ("all", TYPES[q])}
            judge = VALUES[job][PPI]
            expected = ppi_by_hand(y, judge, VALUES[job][MIXED])
            got = means["ppi"]
            assert got["mean"] == pytest.approx(expected["mean"], abs=1e-12)
            assert got["se"] == pytest.approx(expected["se"], abs=1e-12)
            assert (got["ci_low"], got["ci_high"]) == pytest.approx(
                (expected["mean"] - Z * expected["se"], expected["mean"] + Z * expected["se"]),
                abs=1e-12,
            )
            # The same population as people's estimate beside it, and the n it rests on.
            assert (got["n"], got["n_predicted"]) == (expected["n"], expected["n_predicted"])
            assert got["n"] + got["n_predicted"] == means["people"]["n"] == len(y)
            # One variance convention: people's interval is the classical one, ddof 1.
            sd = np.std(list(y.values()), ddof=1)
            assert means["people"]["se"] == pytest.approx(sd / math.sqrt(len(y)), abs=1e-12)
    # The difference of the two jobs: per query, on the queries both score under people's
    # labels, f the difference of the judge's values where both have one.
    [diff] = entry["types"]["all"]["differences"]
    y = {q: VALUES["A"][PEOPLE][q] - VALUES["B"][PEOPLE][q] for q in VALUES["A"][PEOPLE]}
    judge = {q: VALUES["A"][PPI][q] - VALUES["B"][PPI][q] for q in VALUES["A"][PPI]}
    mixed = {q: VALUES["A"][MIXED][q] - VALUES["B"][MIXED][q] for q in QUERIES}
    expected = ppi_by_hand(y, judge, mixed)
    assert diff["ppi"]["mean"] == pytest.approx(expected["mean"], abs=1e-12)
    assert diff["ppi"]["se"] == pytest.approx(expected["se"], abs=1e-12)
    assert (diff["ppi"]["n"], diff["ppi"]["n_predicted"]) == (6, 5)


def test_a_set_of_one_type_gives_one_estimate_per_row_and_all() -> None:
    one = {q: "x" for q in QUERIES}
    metrics, _ = judged_metrics(per(one), LABELLED, ["x", "all"], CFG, SIG)
    [entry] = metrics
    x, every = entry["types"]["x"], entry["types"]["all"]
    assert x == every
    # One difference per estimate in each family, so nothing to correct.
    for name in ESTIMATES:
        [diff] = every["differences"]
        assert diff[name]["p_adjusted"] == pytest.approx(diff[name]["p"], abs=1e-15)
    # Two types: the rows and `all` are three estimates, corrected together.
    metrics, _ = judged_metrics(per(TYPES), LABELLED, ["x", "y", "all"], CFG, SIG)
    rows = [metrics[0]["types"][t]["differences"][0][PEOPLE] for t in ("x", "y", "all")]
    assert [r["p_adjusted"] for r in rows] == holm([r["p"] for r in rows])
