"""A 4-system sweep: tiers per type and cost beside quality in comparison.json, comparison.md
and comparison.html (the page in headless Chromium: slow).

The synthetic set (tests/support/synth_dataset.py, 20 queries per type) is ranked by BM25 the
same way every time: for "kwNNN 门票", passage a holds both terms (rank 1); b and c hold one
and tie, broken by id descending, so c is 2nd and b 3rd. Hence recall@K at top_k = 1, 2, 3, 4:
`pair` (a and b relevant) 0.5, 0.5, 1, 1; `deep` (c relevant) 0, 1, 1, 1; `all` 0.25, 0.75, 1,
1. Every difference is on every query of its type, so each is significant after Holm over
the whole table (72 tests, randomized p at its floor 2/10001, x 72 = 0.014 < 0.05) and each
equality is not: the tiers follow by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import compose_config, config_record
from support.chromium import chromium, embedded
from support.synth_dataset import write_synthetic

from retrieval_bench.compare.build import compare_dirs
from retrieval_bench.config.compare import CompareConfig
from retrieval_bench.job.runner import run_job
from retrieval_bench.jobdir.write import write_job

TOP_KS = (1, 2, 3, 4)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four jobs as `python -m run -m top_k=1,2,3,4 retriever=bm25` leaves them (each job's
    overrides in .hydra/overrides.yaml, where the comparison reads its label), then compared."""
    root = tmp_path_factory.mktemp("tiers")
    data = write_synthetic(root, per_type=20)
    folder = root / "sweep"
    for num, top_k in enumerate(TOP_KS):
        overrides = [
            *data,
            f"cache_dir={root / 'cache'}",
            "retriever=bm25",
            f"top_k={top_k}",
            "cost.latency_queries=5",
        ]
        cfg = compose_config(overrides)
        job = folder / f"{num}-top_k={top_k}"
        write_job(job, run_job(cfg), config_record(cfg))
        (job / ".hydra").mkdir()
        (job / ".hydra" / "overrides.yaml").write_text(f"- top_k={top_k}\n- retriever=bm25\n")
    compare_dirs([folder], CompareConfig(), out_dir=folder)
    return folder


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_tiers_per_type_by_hand(sweep: Path) -> None:
    ds = json.loads((sweep / "comparison.json").read_text())["datasets"]["synth"]
    tiers = {t: cell["tiers"] for t, cell in ds["tiers"]["recall@K"].items()}
    assert tiers == {
        "pair": [["top_k=3", "top_k=4"], ["top_k=1", "top_k=2"]],
        "deep": [["top_k=2", "top_k=3", "top_k=4"], ["top_k=1"]],
        "all": [["top_k=3", "top_k=4"], ["top_k=2"], ["top_k=1"]],
    }
    cell = ds["tiers"]["recall@K"]["all"]
    assert cell["n"] == 40 and cell["unseparated_above"] == {}
    assert cell["beaten_by"]["top_k=1"] == ["top_k=3", "top_k=4", "top_k=2"]
    # Every query agrees, so every resample ranks the same way: the rank intervals are points.
    assert {k: (r["low"], r["high"]) for k, r in cell["ranks"].items()} == {
        "top_k=3": (1, 1),
        "top_k=4": (1, 1),
        "top_k=2": (3, 3),
        "top_k=1": (4, 4),
    }
    settings = json.loads((sweep / "comparison.json").read_text())["settings"]
    assert settings["rank_resamples"] == 1000 and "default_rng(seed=0)" in settings["rank_interval"]


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_comparison_md_shows_tiers_and_cost(sweep: Path) -> None:
    md = (sweep / "comparison.md").read_text(encoding="utf-8")
    tiers = md[md.index("## Tiers per type") : md.index("## Cost beside quality")]
    assert "| deep | 20 | 1: top_k=2, top_k=3, top_k=4 · 2: top_k=1 |" in tiers
    assert "| all | 40 | 1: top_k=3, top_k=4 · 2: top_k=2 · 3: top_k=1 |" in tiers
    cost = md[md.index("## Cost beside quality") :]
    assert "### Pareto front: quality against p95 latency" in cost
    assert "### Pareto front: quality against index size" in cost
    for top_k in TOP_KS:
        assert f"| top_k={top_k} | " in cost


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_the_fronts_follow_the_tiers_tests(sweep: Path) -> None:
    """Index size is one BM25 matrix for all four jobs: at one cost, a configuration is
    dominated exactly when another beats it, so the front is tier 1."""
    ds = json.loads((sweep / "comparison.json").read_text())["datasets"]["synth"]
    sizes = {c["index_bytes"] for c in ds["cost"]["systems"].values()}
    assert len(sizes) == 1
    for qtype, cell in ds["tiers"]["recall@K"].items():
        front = ds["cost"]["pareto"]["index_bytes"]["recall@K"][qtype]["front"]
        assert sorted(front) == sorted(cell["tiers"][0])


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_comparison_html_embeds_the_tiers_and_costs(sweep: Path) -> None:
    data = embedded(sweep / "comparison.html")
    ds = json.loads((sweep / "comparison.json").read_text())["datasets"]["synth"]
    assert data["comparison"]["tiers"] == ds["tiers"]
    assert data["comparison"]["cost"] == ds["cost"]


@pytest.mark.slow
def test_comparison_html_shows_tiers_and_the_pareto_plot_in_chromium(
    chromium_or_skip: None,
    sweep: Path,
) -> None:
    with chromium() as browser:
        browser.open(sweep / "comparison.html")
        browser.select("tier-metric", "recall@K")
        shown = browser.evaluate(
            "Array.from(document.querySelectorAll('#tiers-table tr[data-type]')).map((tr) =>"
            " [tr.dataset.type, Array.from(tr.querySelectorAll('td[data-label]')).map((td) =>"
            " [td.dataset.label, td.dataset.tier])])"
        )
        browser.select("pareto-axis", "index_bytes")
        browser.select("pareto-type", "deep")
        points = browser.evaluate(
            "Array.from(document.querySelectorAll('#pareto-svg circle.pt')).map((c) =>"
            " [c.dataset.label, c.dataset.front])"
        )
        nav = browser.evaluate("Array.from(document.querySelectorAll('nav a')).map(a => a.hash)")
        errors = browser.errors
    assert errors == []
    tiers = {t: dict(cells) for t, cells in shown}
    assert tiers["deep"] == {"top_k=1": "2", "top_k=2": "1", "top_k=3": "1", "top_k=4": "1"}
    assert tiers["all"] == {"top_k=1": "3", "top_k=2": "2", "top_k=3": "1", "top_k=4": "1"}
    assert dict(points) == {
        "top_k=1": "false",
        "top_k=2": "true",
        "top_k=3": "true",
        "top_k=4": "true",
    }
    ours = ["#sec-heatmap", "#sec-tiers", "#sec-cost", "#sec-stages"]
    assert [link for link in nav if link in ours] == ours
