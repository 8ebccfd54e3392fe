"""A job's robustness section from per-query rows (no job): each cell the paired difference of
its variants and originals with the project's sign-flip test, corrected over the family; a kind
the text normalisation erases is `no effect by construction`, outside the family, never
`holds`; a lower-is-better measure's verdict goes its own way; stable@K per kind and type, and
pooled over the kinds per type. The same on a real job: tests/integration/test_robustness_job.py
(slow)."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval_bench.scoring.robustness import (
    DEGRADES,
    IMPROVES,
    NO_EFFECT,
    NORMALISED_ALIKE,
    job_robustness,
)
from retrieval_bench.stats.corrections import holm
from retrieval_bench.stats.paired import paired_test
from retrieval_bench.stats.settings import SignificanceSettings

SIG = SignificanceSettings()
QUERIES = [f"q{i:02d}" for i in range(16)]
TYPES = {q: "fact" if i < 10 else "list" for i, q in enumerate(QUERIES)}
RNG = np.random.default_rng(35)
ORIGINAL = {q: float(RNG.uniform(0.3, 1.0)) for q in QUERIES}
LEAK = {q: float(RNG.uniform(0.0, 0.2)) for q in QUERIES}
HITS = {q: float(i % 4 != 0) for i, q in enumerate(QUERIES)}
NOISE = {q: float(RNG.normal(0, 0.05)) for q in QUERIES}
KINDS = [
    {"kind": k, "library": "x", "variants": 1} for k in ("traditional", "truncate", "halfwidth")
]


def _rows() -> tuple[dict[str, dict], dict[str, dict]]:  # type: ignore[type-arg]
    """Originals, and three kinds of variant: `traditional` loses 0.3 of nDCG and leaks 0.2
    more on every query, `truncate` moves a little either way (on the first 12 queries only),
    `halfwidth` normalises to its original and moves nothing."""
    originals = {
        q: {"query_type": TYPES[q], "ndcg@5": ORIGINAL[q], "leak@5": LEAK[q], "hit@5": HITS[q]}
        for q in QUERIES
    }
    variants: dict[str, dict] = {}  # type: ignore[type-arg]
    for i, q in enumerate(QUERIES):
        moved = {
            "traditional": (ORIGINAL[q] - 0.3, LEAK[q] + 0.2, float(i % 2)),
            "truncate": (ORIGINAL[q] + NOISE[q], LEAK[q], HITS[q]),
            "halfwidth": (ORIGINAL[q], LEAK[q], HITS[q]),
        }
        for kind, (ndcg, leak, hit) in moved.items():
            if kind == "truncate" and i >= 12:
                continue
            variants[f"{q}~{kind}"] = {
                "query_type": TYPES[q], "perturbed_from": q, "kind": kind, "ndcg@5": ndcg,
                "leak@5": leak, "hit@5": hit, "stable@5": float(hit == HITS[q]),
                NORMALISED_ALIKE: kind == "halfwidth",
            }  # fmt: skip
    return originals, variants


def _section() -> dict:  # type: ignore[type-arg]
    originals, variants = _rows()
    return job_robustness(
        {"per_query": variants, "counts": {}}, originals, KINDS, ["ndcg@5", "leak@5"], 5,
        "final", SIG, 5, "table",
    )  # fmt: skip


def test_each_cell_is_the_paired_difference_with_its_corrected_test() -> None:
    section = _section()
    originals, variants = _rows()
    tested = []
    for metric in ("ndcg@5", "leak@5"):
        for qtype in ("fact", "list", "all"):
            for kind in ("traditional", "truncate"):
                mine = {
                    r["perturbed_from"]: r[metric]
                    for r in variants.values()
                    if r["kind"] == kind and qtype in ("all", r["query_type"])
                }
                cell = section["cells"][metric][qtype][kind]
                before = np.array([originals[q][metric] for q in sorted(mine)])
                after = np.array([mine[q] for q in sorted(mine)])
                assert cell["n"] == len(mine)
                assert cell["diff"] == pytest.approx(after.mean() - before.mean(), abs=1e-12)
                assert cell["p_value"] == paired_test(after, before, SIG).p_value
                tested.append(((metric, qtype, kind), cell))
    # One family over the table: Holm over every tested cell (the erased kind is no test).
    adjusted = holm([cell["p_value"] for _, cell in tested])
    assert [cell["p_adjusted"] for _, cell in tested] == adjusted


def test_a_kind_the_normalisation_erases_is_no_effect_by_construction_not_holds() -> None:
    section = _section()
    for metric in ("ndcg@5", "leak@5"):
        for qtype in ("fact", "list", "all"):
            cell = section["cells"][metric][qtype]["halfwidth"]
            assert cell["verdict"] == NO_EFFECT
            assert (cell["diff"], cell["p_value"], cell["p_adjusted"]) == (0.0, None, None)
            assert cell["n"] == cell["unchanged"] == (10 if qtype == "fact" else
                                                     6 if qtype == "list" else 16)  # fmt: skip
    # A kind that moved nothing but is not its original after normalisation is a test: holds.
    originals, variants = _rows()
    for row in variants.values():
        row[NORMALISED_ALIKE] = False
    kinds = [{"kind": "halfwidth", "library": "x", "variants": 1}]
    plain = job_robustness({"per_query": variants, "counts": {}}, originals, kinds, ["ndcg@5"],
                           5, "final", SIG, 5, "table")  # fmt: skip
    assert plain["cells"]["ndcg@5"]["all"]["halfwidth"]["verdict"] == "holds"


def test_a_lower_is_better_measure_degrades_when_it_rises() -> None:
    cells = _section()["cells"]
    # nDCG falls by 0.3 and leak@5 rises by 0.2 on every query: both are for the worse.
    assert cells["ndcg@5"]["all"]["traditional"]["verdict"] == DEGRADES
    assert cells["leak@5"]["all"]["traditional"]["diff"] == pytest.approx(0.2)
    assert cells["leak@5"]["all"]["traditional"]["verdict"] == DEGRADES
    # The same rows with the signs turned: a fall of leak@5 improves.
    originals, variants = _rows()
    for row in variants.values():
        if row["kind"] == "traditional":
            row["leak@5"] = LEAK[row["perturbed_from"]] - 0.2
    kinds = [{"kind": "traditional", "library": "x", "variants": 1}]
    turned = job_robustness({"per_query": variants, "counts": {}}, originals, kinds, ["leak@5"],
                            5, "final", SIG, 5, "table")  # fmt: skip
    assert turned["cells"]["leak@5"]["all"]["traditional"]["verdict"] == IMPROVES


def test_stable_at_k_per_kind_and_pooled_per_type() -> None:
    section = _section()
    _, variants = _rows()
    for qtype in ("fact", "list"):
        mine = [r for r in variants.values() if r["query_type"] == qtype]
        for kind in ("traditional", "truncate", "halfwidth"):
            of_kind = [r["stable@5"] for r in mine if r["kind"] == kind]
            assert section["stable"][qtype][kind] == {"stable": np.mean(of_kind), "n": len(of_kind)}
        # Pooled over every kind's variants of the type (what the trend and the gate read).
        pooled = [r["stable@5"] for r in mine]
        expected = {"n": len(pooled), "stable@5": pytest.approx(np.mean(pooled))}
        assert section["by_type"][qtype] == expected
    every = [r["stable@5"] for r in variants.values()]
    assert section["overall"] == {"n": len(every), "stable@5": pytest.approx(np.mean(every))}
