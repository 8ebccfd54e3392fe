"""End to end, in-process: `router=rules` on the small fixture, its records, metrics, report and
refusals; the app as a subprocess only for the exit code of a bad rules file (slow)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURE, mini_overrides, run_app, run_in_process

from retrieval_bench.errors import BenchError
from retrieval_bench.job.result import JobResult
from retrieval_bench.scoring.aggregate import metric_names

PASSAGE_ENTITIES = {
    record["id"]: set(record["meta"].get("entities", []))
    for record in map(
        json.loads, (FIXTURE / "corpus" / "mini" / "passages.jsonl").read_text().splitlines()
    )
}


@pytest.fixture(scope="module")
def sweep(
    tmp_path_factory: pytest.TempPathFactory, mini_job: tuple[JobResult, Path]
) -> dict[str, Path]:
    """router=none (the session's mini job: router none is the default) and router=rules on
    the fixture, over one cache: the two job folders by router name."""
    tmp = tmp_path_factory.mktemp("router")
    none = mini_job[1]
    rules = run_in_process(["router=rules", *mini_overrides(none.parent)], tmp / "rules")[1]
    return {"none": none, "rules": rules}


def rankings(job: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (job / "rankings.jsonl").read_text().splitlines()]


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_every_query_records_its_parse_route_and_rule(sweep: dict[str, Path]) -> None:
    records = {r["query_id"]: r for r in rankings(sweep["rules"])}
    assert records["m01"]["route"] == "entity_exact"
    assert records["m01"]["parsed"]["mentions"] == [["蜈支洲岛", "蜈支洲岛旅游区"]]
    assert records["m04"]["route"] == "negation"
    assert records["m04"]["rule"].startswith("rules[0]")
    assert records["m04"]["parsed"]["negation_cues"] == ["除了"]
    assert records["m05"]["route"] == "multi_hop"
    assert records["m03"]["route"] == "default" and records["m03"]["rule"] == "default"
    for record in records.values():
        assert set(record["parsed"]) >= {"cities", "entities", "excluded_entities", "negation_cues"}
        assert set(record["baselines"]) == {"bm25", "dense", "hybrid"}
        for stage in [*record["stages"].values(), *record["baselines"].values()]:
            assert len(stage["ids"]) == len(set(stage["ids"]))
            assert stage["scores"] == sorted(stage["scores"], reverse=True)


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_excluded_entity_never_appears_in_any_stage_of_a_negation_query(
    sweep: dict[str, Path],
) -> None:
    negation = [r for r in rankings(sweep["rules"]) if r["route"] == "negation"]
    assert [r["query_id"] for r in negation] == ["m04"]
    for record in negation:
        excluded = set(record["parsed"]["excluded_entities"])
        assert excluded == {"日月湾"}
        assert "exclusions" in record["filter"]["applied"]
        assert set(record["stages"]) == {"bm25", "dense", "fused", "final"}
        for name, stage in record["stages"].items():
            assert stage["ids"], name
            for pid in stage["ids"]:
                assert not PASSAGE_ENTITIES[pid] & excluded, (name, pid)
        # The trap is real: without the router, every single retriever returns it.
        for baseline in record["baselines"].values():
            assert "wn-ryw-surf" in baseline["ids"]


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_router_none_records_no_route_and_no_baselines(sweep: dict[str, Path]) -> None:
    for record in rankings(sweep["none"]):
        assert record["route"] is None and record["baselines"] == {}
        assert "exclusions" not in record["filter"]["applied"]
    assert "router" not in json.loads((sweep["none"] / "metrics.json").read_text())


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_baselines_equal_router_none_jobs(sweep: dict[str, Path]) -> None:
    """The hybrid baseline of a routed job is exactly the unrouted hybrid job's final stage."""
    routed = sweep["rules"] / "trec" / "baselines"
    assert sorted(p.name for p in routed.iterdir()) == ["bm25.run", "dense.run", "hybrid.run"]
    assert (routed / "hybrid.run").read_bytes() == (
        sweep["none"] / "trec" / "final.run"
    ).read_bytes()
    none = json.loads((sweep["none"] / "metrics.json").read_text())
    rules = json.loads((sweep["rules"] / "metrics.json").read_text())
    doc_metrics = [*metric_names(none["cutoffs"]), "n", "undefined"]
    baseline, unrouted = rules["baselines"]["hybrid"]["by_type"], none["stages"]["final"]["by_type"]
    assert baseline.keys() == unrouted.keys()
    for qtype, group in baseline.items():
        assert group == {m: unrouted[qtype][m] for m in doc_metrics if m in unrouted[qtype]}


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_routed_job_encodes_each_query_once(sweep: dict[str, Path]) -> None:
    # Routed pools and the baselines' re-ranking of excluding queries share one dense batch.
    manifest = json.loads((sweep["rules"] / "manifest.json").read_text())
    counts = manifest["embeddings"]["queries"]
    texts = {r["query"] for r in rankings(sweep["rules"])}
    assert counts["encoded"] + counts["cached"] == len(texts)


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_metrics_hold_the_router_measurement(sweep: dict[str, Path]) -> None:
    router = json.loads((sweep["rules"] / "metrics.json").read_text())["router"]
    assert router["confusion"]["entity_exact"] == {"default": 1, "entity_exact": 2}
    assert router["confusion"]["negation"] == {"negation": 1}
    assert router["accuracy"]["n"] == 9
    assert router["accuracy"]["overall"] == pytest.approx(8 / 9)
    assert router["accuracy"]["by_type"]["entity_exact"]["accuracy"] == pytest.approx(2 / 3)
    assert router["counts"]["default"] == 5
    assert router["counts"]["default_no_signal"] == 5
    assert router["exclusions"] == {"queries": 1, "violations": []}
    assert router["negative_leak"]["routed"]["rate"] == 0.0
    assert router["negative_leak"]["hybrid"]["queries"] == ["m04"]
    comparison = router["comparison"]
    assert comparison["systems"] == ["routed", "bm25", "dense", "hybrid"]
    negation = comparison["by_type"]["negation"]
    assert negation["n"] == 1
    # m04: routed excludes the 日月湾 trap, so its one relevant passage ranks first, not second.
    assert negation["routed"]["ndcg@6"] == 1.0
    assert negation["hybrid"]["ndcg@6"] == pytest.approx(1 / math.log2(3), rel=1e-12)


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_report_shows_confusion_matrix_and_per_type_comparison(sweep: dict[str, Path]) -> None:
    report = (sweep["rules"] / "report.md").read_text()
    assert "# mini: router=rules (top_k 6)" in report
    assert "### Confusion matrix" in report
    assert "| labelled \\ routed | negation | multi_hop | entity_exact | default |" in report
    assert "### Did routing help?" in report
    assert "| type | n | route acc | ndcg@6 routed | ndcg@6 bm25 | ndcg@6 dense |" in report
    assert "| negation | 1 | 1.000 | 1.000 |" in report


def _bad_rules(tmp_path: Path) -> Path:
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - {route: exact, when: {short: true}}\n", encoding="utf-8")
    return rules


def test_bad_rules_file_stops_the_job_naming_file_and_entry(tmp_path: Path) -> None:
    rules = _bad_rules(tmp_path)
    with pytest.raises(BenchError) as error:
        run_in_process(
            [*mini_overrides(tmp_path), "router=rules", f"router.rules_file={rules}"], tmp_path
        )
    assert f"{rules}: rules[0].route: unknown route 'exact'" in str(error.value)
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_bad_rules_file_exits_2(tmp_path: Path) -> None:
    rules = _bad_rules(tmp_path)
    proc = run_app(
        [
            *mini_overrides(tmp_path),
            "router=rules",
            f"router.rules_file={rules}",
            f"hydra.run.dir={tmp_path / 'run'}",
        ]
    )
    assert proc.returncode == 2
    assert f"{rules}: rules[0].route: unknown route 'exact'" in proc.stderr
    assert not (tmp_path / "run" / "metrics.json").exists()


def test_bad_inline_router_key_is_named(tmp_path: Path) -> None:
    overrides = [*mini_overrides(tmp_path), "router=rules", "router.default_route=nowhere"]
    with pytest.raises(BenchError) as error:
        run_in_process(overrides, tmp_path)
    assert "router.default_route" in str(error.value) and "nowhere" in str(error.value)


def test_alias_claimed_twice_stops_the_job_with_file_and_line(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(FIXTURE / "corpus" / "mini", corpus)
    with (corpus / "lexicon.jsonl").open("a", encoding="utf-8") as handle:
        handle.write('{"name": "蜈支洲码头", "aliases": ["蜈支洲"]}\n')
    lines = len((corpus / "lexicon.jsonl").read_text().splitlines())
    with pytest.raises(BenchError) as error:
        run_in_process(
            [*mini_overrides(tmp_path), f"dataset.corpus={corpus}", "router=rules"], tmp_path
        )
    assert f"{corpus / 'lexicon.jsonl'}:{lines}:" in str(error.value)
    assert "'蜈支洲'" in str(error.value)
