"""A sweep's robustness table: every job an arm, each cell the same paired difference the job
measured, tested with one family over every arm x kind x type (Holm over all of them);
comparison.md and the heatmap show it, the explorer lists each variant after its original, and
the gate holds stable@K like any metric."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import run_app, run_in_process
from support.chromium import embedded

from retrieval_bench.benchmark.gate import run_gate
from retrieval_bench.benchmark.history import JobKey
from retrieval_bench.compare.build import compare_dirs
from retrieval_bench.config.benchmark import GateConfig
from retrieval_bench.config.compare import CompareConfig
from retrieval_bench.jobdir.names import COMPARISON_HTML
from retrieval_bench.jobdir.read import FinishedJob
from retrieval_bench.stats.corrections import holm
from retrieval_bench.stats.settings import SignificanceSettings

KINDS = "robustness.kinds=[traditional,truncate]"
ARMS = ("bm25", "bm25_bigram")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory, shared_cache: Path) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("sweep")
    jobs = {}
    for number, arm in enumerate(ARMS):
        result, folder = run_in_process(
            [f"retriever={arm}", "top_k=10", KINDS, f"cache_dir={shared_cache}"],
            root / f"{number}-{arm}",
        )
        jobs[arm] = (result, folder)
    output = compare_dirs([root], CompareConfig(n_resamples=2000), out_dir=root)
    return {"root": root, "jobs": jobs, "record": output.record}


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_every_job_is_an_arm_with_the_differences_it_measured(sweep: dict[str, Any]) -> None:
    view = sweep["record"]["datasets"]["travel"]["robustness"]
    labels = {arm: f"retriever={arm}" for arm in ARMS}
    assert view["arms"] == [labels[a] for a in ARMS]
    assert view["kinds"] == ["traditional", "truncate"]
    assert view["metrics"] == ["ndcg@10"]
    for arm in ARMS:
        own = sweep["jobs"][arm][0].metrics["robustness"]
        for qtype in view["types"]:
            for kind in view["kinds"]:
                mine = view["cells"]["ndcg@10"][qtype][labels[arm]][kind]
                theirs = own["cells"]["ndcg@10"][qtype][kind]
                assert mine["diff"] == theirs["diff"] and mine["n"] == theirs["n"]
                stable = view["stable"][qtype][labels[arm]][kind]
                assert stable == own["stable"][qtype][kind]


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_one_family_over_every_arm_kind_and_type(sweep: dict[str, Any]) -> None:
    view = sweep["record"]["datasets"]["travel"]["robustness"]
    cells = [
        cell
        for by_arm in view["cells"]["ndcg@10"].values()
        for by_kind in by_arm.values()
        for cell in by_kind.values()
        if cell["n"]
    ]
    assert len(cells) == len(ARMS) * 2 * len(view["types"])
    adjusted = holm([c["p_value"] for c in cells])
    assert [c["p_adjusted"] for c in cells] == pytest.approx(adjusted)
    significant = [c for c in cells if c["verdict"] in ("degrades", "improves")]
    assert all(c["p_adjusted"] < SignificanceSettings().alpha for c in significant)
    assert significant, "traditional characters move BM25 on travel"


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_comparison_md_heatmap_and_html(sweep: dict[str, Any]) -> None:
    root = sweep["root"]
    markdown = (root / "comparison.md").read_text(encoding="utf-8")
    assert "## Robustness: variant minus original, stage `final`" in markdown
    assert "![robustness heatmap](robustness.png)" in markdown
    assert "| retriever=bm25_bigram |" in markdown
    assert (root / "robustness.png").stat().st_size > 10_000
    json.loads((root / "comparison.json").read_text(encoding="utf-8"))  # strict JSON
    payload = embedded(root / COMPARISON_HTML)
    assert payload["robustness"]["arms"] == ["retriever=bm25", "retriever=bm25_bigram"]
    ids, variant_of = payload["queries"]["ids"], payload["queries"]["variant_of"]
    for i, source in enumerate(variant_of):
        if source is not None:  # right after its original (or after a sibling variant)
            assert ids[i].startswith(source + "~")
            assert ids[i - 1] == source or variant_of[i - 1] == source
    assert variant_of.count(None) == 166
    system = payload["systems"][0]
    column = system["values"]["final"]["stable@10"]
    first = next(i for i, source in enumerate(variant_of) if source is not None)
    assert column[first] in (0.0, 1.0) and column[0] is None


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_the_gate_holds_stable_at_k(sweep: dict[str, Any]) -> None:
    """bm25 as the baseline month, bm25_bigram as this month: stable@K is checked per type on
    the variants both scored, like any gated metric."""
    before = FinishedJob.load(sweep["jobs"]["bm25"][1])
    after = FinishedJob.load(sweep["jobs"]["bm25_bigram"][1])
    rows = after.metrics["robustness"]["per_query"]
    assert after.per_query("final", "stable@K") == {q: r["stable@10"] for q, r in rows.items()}
    key = JobKey("travel", "bm25")
    gate = GateConfig(tolerances={"stable@K": 0.02})
    result = run_gate({key: after}, {key: before}, gate, SignificanceSettings(n_resamples=2000))
    checks = [c for c in result.checks if c.metric == "stable@K"]
    assert {c.query_type for c in checks} >= {"all", "entity_exact"}
    overall = next(c for c in checks if c.query_type == "all")
    assert overall.n == len(rows)
    assert overall.after == pytest.approx(sum(r["stable@10"] for r in rows.values()) / len(rows))


@pytest.mark.slow
def test_the_robustness_sweep_from_the_command_line(tmp_path: Path, shared_cache: Path) -> None:
    """`python -m run -m experiment=robustness` as a user runs it (two BM25 arms, two kinds, to
    stay quick): the sweep's comparison holds the robustness table and heatmap; a misspelt kind
    exits 2 naming the key."""
    sweep = tmp_path / "sweep"
    done = run_app(
        [
            "-m",
            "experiment=robustness",
            "retriever=bm25,bm25_nolexicon",
            "robustness.kinds=[traditional,spacing]",
            f"cache_dir={shared_cache}",
            f"hydra.sweep.dir={sweep}",
        ]
    )
    assert done.returncode == 0, done.stderr
    assert "robustness (variant minus original, stage final; stable@10):" in done.stdout
    assert "## Robustness" in (sweep / "comparison.md").read_text(encoding="utf-8")
    assert (sweep / "robustness.png").is_file()
    bad = run_app(["robustness.kinds=[tradtional]", f"cache_dir={shared_cache}"])
    assert bad.returncode == 2
    assert "'robustness.kinds': unknown kind 'tradtional'; did you mean 'traditional'?" in (
        bad.stderr
    )


def test_a_months_robustness_node_reaches_every_job() -> None:
    """experiment=monthly_robustness: the driver's `robustness:` node becomes overrides of each
    job (a key given on the command line stays the command line's), which compose back to it."""
    from conftest import compose_config

    from retrieval_bench.benchmark.month import robustness_overrides
    from retrieval_bench.config.robustness import RobustnessConfig

    node = RobustnessConfig(kinds=["traditional", "spacing"], rate=0.5, opencc_traditional="s2tw")
    overrides = robustness_overrides(node, ["robustness.rate=0.3"])
    assert overrides == [
        "robustness.kinds=['traditional','spacing']",
        "robustness.opencc_traditional='s2tw'",
    ]
    composed = compose_config([*overrides, "robustness.rate=0.3"]).robustness
    assert (composed.kinds, composed.opencc_traditional, composed.rate) == (
        ["traditional", "spacing"],
        "s2tw",
        0.3,
    )
    month = compose_config(["experiment=monthly_robustness"])
    assert month.robustness.kinds and "stable@K" in month.benchmark.gate.tolerances
