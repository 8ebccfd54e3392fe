"""A job with perturbed variants (`robustness:`): the originals are scored exactly as without
them, every variant is scored against its original at the final stage (the paired difference
with the project's sign-flip test and family correction, and stable@K), a kind that changed no
query is counted and the job goes on, stored rankings re-score to the same numbers, and bad
input is refused naming the key or the file and line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import ROOT, compose_config, run_in_process

from retrieval_bench.data.evalset import load_evalset
from retrieval_bench.errors import ConfigError, DataError
from retrieval_bench.labels.rescore import rescore_job
from retrieval_bench.scoring.robustness import NO_EFFECT
from retrieval_bench.stats.paired import paired_test
from retrieval_bench.stats.settings import SignificanceSettings
from run.perturb import main as perturb_main

KINDS = "robustness.kinds=[traditional,halfwidth,truncate,unspacing]"
BASE = ["retriever=bm25", "top_k=10"]


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory, shared_cache: Path) -> dict[str, Any]:
    """The bm25 job on travel with and without variants, sharing one token cache."""
    root = tmp_path_factory.mktemp("robust")
    cache = f"cache_dir={shared_cache}"
    plain, _ = run_in_process([*BASE, cache], root / "plain")
    robust, folder = run_in_process([*BASE, cache, KINDS], root / "robust")
    return {"plain": plain, "robust": robust, "folder": folder, "root": root, "cache": cache}


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_originals_score_as_without_variants(jobs: dict[str, Any]) -> None:
    plain, robust = jobs["plain"].metrics, jobs["robust"].metrics
    assert robust["stages"] == plain["stages"]
    assert robust["refusal"] == plain["refusal"]
    assert "robustness" not in plain
    # the TREC export holds the originals only (it re-scores to the stages' metrics)
    run = (jobs["folder"] / "trec" / "final.run").read_text(encoding="utf-8")
    assert "~" not in run
    ranked = [json.loads(line) for line in (jobs["folder"] / "rankings.jsonl").open()]
    variants = [r for r in ranked if "perturbed_from" in r]
    assert {r["perturbation"]["kind"] for r in variants} == {"traditional", "halfwidth", "truncate"}
    assert all(
        r["query_id"] == f"{r['perturbed_from']}~{r['perturbation']['kind']}" for r in variants
    )


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_each_cell_is_the_paired_difference_with_its_test(jobs: dict[str, Any]) -> None:
    metrics = jobs["robust"].metrics
    robustness = metrics["robustness"]
    originals = metrics["stages"]["final"]["per_query"]
    rows = robustness["per_query"]
    assert robustness["metrics"] == ["ndcg@10"]
    for kind in ("traditional", "truncate"):
        mine = {r["perturbed_from"]: r for r in rows.values() if r["kind"] == kind}
        before = np.array([originals[q]["ndcg@10"] for q in sorted(mine)])
        after = np.array([mine[q]["ndcg@10"] for q in sorted(mine)])
        cell = robustness["cells"]["ndcg@10"]["all"][kind]
        assert cell["n"] == len(mine)
        assert cell["diff"] == pytest.approx(after.mean() - before.mean(), abs=1e-12)
        test = paired_test(after, before, SignificanceSettings())
        assert cell["p_value"] == pytest.approx(test.p_value)
        # Holm over every cell of the table: the adjusted p-value is never below the raw one
        assert cell["p_adjusted"] >= cell["p_value"]
        stable = [originals[q]["hit@10"] == mine[q]["hit@10"] for q in mine]
        assert robustness["stable"]["all"][kind] == {"stable": np.mean(stable), "n": len(stable)}
    # NFKC makes the width forms invisible to BM25's tokens: nothing moves, by construction
    # (not `holds`, which would claim a test), and the cell is no test of the family.
    halfwidth = robustness["cells"]["ndcg@10"]["all"]["halfwidth"]
    assert halfwidth["diff"] == 0 and halfwidth["verdict"] == NO_EFFECT
    assert halfwidth["p_value"] is None and halfwidth["n"] == sum(
        r["kind"] == "halfwidth" for r in rows.values()
    )
    assert all(r["normalised_as_original"] for r in rows.values() if r["kind"] == "halfwidth")
    assert robustness["cells"]["ndcg@10"]["all"]["traditional"]["verdict"] == "degrades"


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_a_kind_that_changed_nothing_is_counted(jobs: dict[str, Any]) -> None:
    kinds = {k["kind"]: k for k in jobs["robust"].metrics["robustness"]["kinds"]}
    assert kinds["unspacing"]["variants"] == 0
    assert kinds["unspacing"]["left_out"] == {"holds no whitespace": 166}
    report = (jobs["folder"] / "report.md").read_text(encoding="utf-8")
    assert "`unspacing` (str.isspace): 0 variants" in report and "changed no query" in report
    assert "![robustness heatmap](plots/robustness.png)" in report
    assert (jobs["folder"] / "plots" / "robustness.png").is_file()


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_stored_rankings_rescore_to_the_same_robustness(jobs: dict[str, Any]) -> None:
    import yaml

    folder = jobs["folder"]
    (folder / ".hydra").mkdir(exist_ok=True)
    config = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))["config"]
    (folder / ".hydra" / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    rescored = rescore_job(folder)
    assert rescored.metrics["robustness"] == jobs["robust"].metrics["robustness"]


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_a_perturbed_set_runs_as_the_same_variants(jobs: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "travel.perturbed.jsonl"
    evalset = ROOT / "evalsets" / "travel.jsonl"
    assert perturb_main([str(evalset), "--kinds", "traditional,truncate", "--out", str(out)]) == 0
    result, _ = run_in_process([*BASE, jobs["cache"], f"robustness.sets=[{out}]"], tmp_path)
    robustness = result.metrics["robustness"]
    made = jobs["robust"].metrics["robustness"]
    for kind in ("traditional", "truncate"):
        assert robustness["cells"]["ndcg@10"]["all"][kind]["diff"] == pytest.approx(
            made["cells"]["ndcg@10"]["all"][kind]["diff"]
        )


def test_a_variant_of_a_missing_query_is_refused_naming_its_line(tmp_path: Path) -> None:
    variant = load_evalset(ROOT / "evalsets" / "travel.jsonl")[0]
    record = {
        "query_id": "nope~traditional",
        "query": variant.query,
        "query_type": variant.query_type,
        "label_status": "reviewed",
        "relevant_ids": list(variant.relevant_ids),
        "meta": {"perturbed_from": "nope", "perturbation": {"kind": "traditional"}},
    }
    path = tmp_path / "bad.jsonl"
    path.write_text("\n" + json.dumps(record, ensure_ascii=False) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"{path}:2: .*names 'nope', which is not a query"):
        run_in_process([*BASE, f"cache_dir={tmp_path}", f"robustness.sets=[{path}]"], tmp_path)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("robustness.kinds=[fullwidht]", "unknown kind 'fullwidht'; did you mean 'fullwidth'?"),
        ("robustness.rate=0", r"must be in \(0, 1\], got 0"),
        ("robustness.rate=1.5", r"must be in \(0, 1\], got 1.5"),
        ("robustness.metrics=[stable@K]", "stable@K is not tested per variant"),
    ],
)
def test_bad_robustness_keys_are_refused(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        compose_config([override])
