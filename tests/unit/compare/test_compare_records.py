"""Comparison records from hand-made job folders: strict JSON with unbounded CI ends, p-values at
the resampling floor printed as bounds, the weak flag against the ideal bound, cut-offs deeper
than the list."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retrieval_bench.compare.build import compare_dataset, compare_dirs, settings_record
from retrieval_bench.config.compare import CompareConfig
from retrieval_bench.jobdir.read import FinishedJob
from retrieval_bench.reports.comparison import comparison_markdown
from retrieval_bench.stats.paired import at_floor


def _write_job(root: Path, name: str, recall: list[float]) -> None:
    job = root / name
    (job / ".hydra").mkdir(parents=True)
    rows = {
        f"q{i:02d}": {"query_type": "fact" if i < 5 else "other", "n_relevant": 1, "recall@2": v}
        for i, v in enumerate(recall)
    }
    stage = {"per_query": rows, "counts": {"scored": len(rows), "excluded": {}}}
    (job / "metrics.json").write_text(json.dumps({"stages": {"final": stage}}))
    config = {"top_k": 2, "dataset": {"name": "synth"}}
    (job / "manifest.json").write_text(json.dumps({"config": config}))
    (job / ".hydra" / "overrides.yaml").write_text(f"- retriever={name}\n")
    (job / "report.md").write_text("# job\n")


def _refuse(name: str) -> None:
    raise ValueError(f"not JSON: {name}")


@pytest.mark.parametrize("correction", ["holm", "bh"])
def test_comparison_json_is_strict_and_unbounded_ends_are_null(
    tmp_path: Path, correction: str
) -> None:
    # "fact": 5 queries, whose sign-flip CI at the family's level cannot be bounded; "other":
    # one query, a mean but no test worth the name.
    _write_job(tmp_path, "bm25", [0.9, 0.8, 0.7, 1.0, 0.6, 0.5])
    _write_job(tmp_path, "dense", [0.1, 0.3, 0.2, 0.4, 0.0, 0.5])
    cfg = CompareConfig(metrics=["recall@K"], min_queries=1, correction=correction)
    out = compare_dirs([tmp_path], cfg, tmp_path)
    record = json.loads((tmp_path / "comparison.json").read_text(), parse_constant=_refuse)
    test = record["datasets"]["synth"]["cells"]["recall@K"]["fact"]["tests"]["retriever=dense"]
    assert (test["ci_low"], test["ci_high"], test["ci_unbounded"]) == (
        None,
        None,
        "unbounded: too few queries",
    )
    assert test["correction"] == correction and f"p_{correction}" in test
    text = (tmp_path / "comparison.md").read_text()
    assert "[unbounded, unbounded]" in text
    assert ("Benjamini-Hochberg" in text) == (correction == "bh")
    assert out.record == record


def _job(name: str, recall: list[float], n_relevant: int = 4, top_k: int = 2) -> FinishedJob:
    rows = {
        f"q{i:02d}": {
            "query_type": "fact",
            "n_relevant": n_relevant,
            f"recall@{top_k}": v,
            f"hit@{top_k}": float(v > 0),
        }
        for i, v in enumerate(recall)
    }
    return FinishedJob(
        path=Path(name),
        metrics={"stages": {"final": {"per_query": rows}}},
        config={"top_k": top_k, "dataset": {"name": "synth"}},
        overrides={"retriever": name},
        choices={"retriever": name},
        num=None,
    )


def _markdown(jobs: list[FinishedJob], cfg: CompareConfig) -> tuple[dict, str]:
    ds = compare_dataset(jobs, cfg)
    return ds, comparison_markdown({"settings": settings_record(cfg), "datasets": {"synth": ds}})


def test_p_value_at_the_resampling_floor_prints_as_a_bound() -> None:
    # 30 queries all better by 0.25: 2**30 patterns > 10 000 resamples, none as extreme.
    jobs = [_job("bm25", [0.5] * 30), _job("dense", [0.25] * 30)]
    cfg = CompareConfig(metrics=["recall@K"], family="cell")
    ds, text = _markdown(jobs, cfg)
    test = ds["cells"]["recall@K"]["all"]["tests"]["retriever=dense"]
    assert test["p_value"] == 2 / 10_001 and test["p_at_floor"]
    assert at_floor(test["p_value"], 30, 10_000) and not at_floor(0.001, 30, 10_000)
    tests_row = "| all | 30 | retriever=bm25 | retriever=dense |"
    row = next(line for line in text.splitlines() if line.startswith(tests_row))
    assert row.endswith("| < 0.0002 | < 0.0002 | +0/-30/=0 | no variation |")
    assert "0.0002 |" not in row.replace("< 0.0002 |", "")
    assert "`compare.family=cell`" in text
    # In a family of two the Holm p-value is twice the floor, and an upper bound too. (Two
    # metrics: the type's row and `all` of one metric are one test on a set of one type.)
    _, text = _markdown(jobs, CompareConfig(metrics=["recall@K", "hit@K"], family="table"))
    row = next(line for line in text.splitlines() if line.startswith(tests_row))
    assert row.endswith("| < 0.0002 | ≤ 0.0004 | +0/-30/=0 | no variation |")


def test_all_weak_compares_against_the_ideal_bound() -> None:
    # 4 relevant, K = 2: recall_bound@2 = 0.5. 0.3 is 60% of what any ranking could reach:
    # not weak (the fixed 0.5 rule flagged it); 0.2 is 40%: weak.
    cfg = CompareConfig(metrics=["recall@K"])
    ds, _ = _markdown([_job("bm25", [0.3] * 12), _job("dense", [0.1] * 12)], cfg)
    entry = ds["best"]["all"]["recall@K"]
    assert (entry["bound"], entry["all_weak"]) == (0.5, False)
    ds, _ = _markdown([_job("bm25", [0.2] * 12), _job("dense", [0.1] * 12)], cfg)
    entry = ds["best"]["all"]["recall@K"]
    assert (entry["bound"], entry["all_weak"]) == (0.5, True)
    assert entry["text"] == "retriever=bm25 (all weak: best 0.200 < 0.5 x bound 0.500)"
    # hit@K: the ideal is 1 whatever |G| is.
    cfg_hit = CompareConfig(metrics=["hit@K"])
    ds, _ = _markdown([_job("bm25", [0.2] * 4 + [0.0] * 8), _job("dense", [0.0] * 12)], cfg_hit)
    entry = ds["best"]["all"]["hit@K"]
    assert (entry["bound"], entry["all_weak"]) == (1.0, True)


def test_comparison_marks_a_metric_deeper_than_the_list() -> None:
    jobs = [_job("bm25", [0.5] * 12), _job("dense", [0.25] * 12)]
    for job in jobs:
        job.metrics["stages"]["final"]["depth_exceeds_list"] = {"list_length": 2, "cutoffs": [3]}
        for row in job.metrics["stages"]["final"]["per_query"].values():
            row["recall@3"] = row["recall@2"]
    ds, text = _markdown(jobs, CompareConfig(metrics=["recall@3", "recall@K"]))
    deep = {m["spec"]: m["depth_exceeds_list"] for m in ds["metrics"]}
    assert deep == {"recall@3": {"retriever=bm25": 2, "retriever=dense": 2}, "recall@K": {}}
    lists = "retriever=bm25: lists of 2, retriever=dense: lists of 2"
    assert f"## recall@3 ‡ deeper than the list ({lists})" in text
    assert "## recall@2\n" in text
