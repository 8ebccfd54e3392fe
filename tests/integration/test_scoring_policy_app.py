"""End to end on the shipped `policy` set (BM25 only, so no encoder is needed), in-process: the
metric families in metrics.json, leak@K exactly 0 under the permission filter and its exact
value without it, refusal and hop metrics, group-by fields, and the report with its plots."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import compose_config, run_app, run_in_process

from retrieval_bench.errors import ConfigError

FAMILIES = {"readable", "leak", "entities", "negative_entities", "evidence"}
GROUP_BY = "scoring.group_by=[meta.file_type,user_role,query_length]"


def _job(tmp: Path, name: str, *overrides: str) -> Path:
    base = ["dataset=policy", "retriever=bm25", f"cache_dir={tmp / 'cache'}"]
    _, run_dir = run_in_process([*base, *overrides], tmp / name)
    return run_dir


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("policy")
    return {
        "on": _job(tmp, "on", GROUP_BY),
        "off": _job(tmp, "off", "filters.permissions=false"),
    }


def _metrics(run_dir: Path) -> dict:
    return json.loads((run_dir / "metrics.json").read_text())


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_metrics_json_holds_every_family_for_every_stage(jobs: dict[str, Path]) -> None:
    metrics = _metrics(jobs["on"])
    for name, stage in metrics["stages"].items():
        assert set(stage["families"]) == FAMILIES, name
        for family in stage["families"].values():
            assert {"overall", "by_type", "counts", "per_query", "excluded_queries"} <= set(family)
            assert family["counts"]["scored"] == family["overall"]["n"]
    final = metrics["stages"]["final"]["families"]
    assert {"readable_recall@6", "readable_recall_pooled@6"} <= set(final["readable"]["overall"])
    assert {"leak@6", "leak_pooled@6", "leak_any@6"} <= set(final["leak"]["overall"])
    assert "entity_recall@6" in final["entities"]["overall"]
    assert set(final["evidence"]["by_hops"]) >= {"1", "2", "3"}
    assert final["evidence"]["curves"]["k"] == [1, 2, 3, 4, 5, 6]
    # the permission queries: excluded from readable recall, should-refuse in refusal
    assert final["readable"]["counts"]["excluded"]["no_readable_relevant"] == 14
    refusal = metrics["refusal"]
    assert refusal["stage"] == "bm25"  # auto: no dense arm in this job
    assert refusal["counts"]["should_refuse"] == {"no_answer": 12, "no_readable_relevant": 14}
    balanced = refusal["balanced"]
    assert balanced["threshold"] == pytest.approx(9.512677952602747, rel=1e-9)
    assert balanced["answered_rate"] == pytest.approx(60 / 74, rel=1e-12)
    assert balanced["refused_rate"] == pytest.approx(21 / 26, rel=1e-12)
    # group-by fields reach every family
    for key in ("by_meta.file_type", "by_user_role", "by_query_length"):
        assert key in metrics["stages"]["final"] and key in final["leak"], key


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_permission_filter_gives_zero_leak_and_off_gives_leaks(jobs: dict[str, Path]) -> None:
    on, off = _metrics(jobs["on"]), _metrics(jobs["off"])
    for stage in on["stages"].values():
        leak = stage["families"]["leak"]
        assert leak["overall"]["n"] == 105
        assert leak["overall"]["leak@6"] == 0.0
        assert all(row["leaked@6"] == 0 for row in leak["per_query"].values())
    off_leak = off["stages"]["final"]["families"]["leak"]
    assert off_leak["overall"]["n"] == 105
    assert off_leak["overall"]["leak@6"] == pytest.approx(0.15079365079365076, rel=1e-12)
    assert off_leak["by_type"]["permission"]["leak_any@6"] == 1.0
    # readable recall is measured over the same queries either way
    assert (
        on["stages"]["final"]["families"]["readable"]["overall"]["n"]
        == off["stages"]["final"]["families"]["readable"]["overall"]["n"]
    )


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_report_links_existing_plots(jobs: dict[str, Path]) -> None:
    run_dir = jobs["on"]
    report = (run_dir / "report.md").read_text()
    for section in ("## Headline", "## Refusal", "## Evidence chains", "by `meta.file_type`"):
        assert section in report, section
    for png in ("plots/refusal.png", "plots/per_type_final.png", "plots/evidence_curves.png"):
        assert f"]({png})" in report
        assert (run_dir / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_group_by_field_names_the_key(tmp_path: Path) -> None:
    overrides = ["dataset=policy", "retriever=bm25", "scoring.group_by=[meta.nope]"]
    with pytest.raises(ConfigError, match=r"scoring\.group_by.*meta\.nope"):
        run_in_process([*overrides, f"cache_dir={tmp_path / 'cache'}"], tmp_path)
    assert compose_config(overrides).scoring.group_by == ["meta.nope"]


@pytest.mark.slow
def test_bad_group_by_field_exits_2(tmp_path: Path) -> None:
    proc = run_app(
        [
            "dataset=policy",
            "retriever=bm25",
            "scoring.group_by=[meta.nope]",
            f"hydra.run.dir={tmp_path / 'run'}",
        ]
    )
    assert proc.returncode == 2
    assert "scoring.group_by" in proc.stderr and "meta.nope" in proc.stderr


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_family_headlines_sit_in_the_stage_overall_as_the_contract_says(
    jobs: dict[str, Path],
) -> None:
    """The job-folder contract (ARCHITECTURE.md): every metric name is read from a stage's
    overall / by_type."""
    metrics = _metrics(jobs["on"])
    for stage in metrics["stages"].values():
        overall = stage["overall"]
        for name in ("leak@6", "readable_recall@6", "entity_recall@6", "evidence_chain@6"):
            assert name in overall, name
        assert overall["n_leak"] == stage["families"]["leak"]["overall"]["n"]
        assert overall["leak@6"] == stage["families"]["leak"]["overall"]["leak@6"]
        assert stage["by_type"]["permission"]["n_readable"] == 0
