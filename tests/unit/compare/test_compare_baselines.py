"""`compare.baselines`: several ablation baselines, each delta saying against which; a baseline
the sweep cannot hold is refused naming the key (exit 2), before the sweep's jobs run when its
overrides already say so."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ROOT, mini_overrides, run_app

from retrieval_bench.compare.baselines import check_sweep, resolve_baseline
from retrieval_bench.compare.build import build_ablation
from retrieval_bench.config.compare import ANY_KEY, CompareConfig
from retrieval_bench.errors import ConfigError
from retrieval_bench.jobdir.job_sets import assign_labels
from retrieval_bench.jobdir.read import FinishedJob
from retrieval_bench.stats.verdicts import ALL


def _job(name: str, retriever: str, top_k: int, values: dict[str, float]) -> FinishedJob:
    per_query = {q: {"query_type": "t", f"recall@{top_k}": v} for q, v in values.items()}
    return FinishedJob(
        path=Path(name),
        metrics={"stages": {"final": {"per_query": per_query}}},
        config={"top_k": top_k, "dataset": {"name": "d"}},
        overrides={"retriever": retriever, "top_k": str(top_k)},
        choices={},
        num=None,
    )


@pytest.fixture
def jobs() -> list[FinishedJob]:
    out = [
        _job("a", "bm25", 6, {f"q{i}": 0.0 for i in range(12)}),
        _job("b", "dense", 6, {f"q{i}": 1.0 for i in range(12)}),
        _job("c", "hybrid", 6, {f"q{i}": 0.5 for i in range(12)}),
    ]
    assign_labels(out)
    return out


def test_a_bare_value_names_the_varying_key_that_takes_it(jobs: list[FinishedJob]) -> None:
    keys = ["retriever"]
    assert resolve_baseline({ANY_KEY: "dense"}, jobs, keys, "compare.baselines") == {
        "retriever": "dense"
    }
    assert resolve_baseline({"retriever": "bm25"}, jobs, keys, "k") == {"retriever": "bm25"}
    assert resolve_baseline({}, jobs, keys, "k") == {}


@pytest.mark.parametrize(
    ("baseline", "why"),
    [
        ({ANY_KEY: "colbert"}, "'colbert' is not in the sweep: no varying key takes it"),
        ({"retriever": "colbert"}, "retriever=colbert is not in the sweep: no job has"),
        ({"top_k": "6"}, "top_k do not vary"),
    ],
)
def test_a_baseline_not_in_the_sweep_is_refused_naming_the_key(
    jobs: list[FinishedJob], baseline: dict[str, str], why: str
) -> None:
    with pytest.raises(ConfigError, match=r"compare\.baselines") as error:
        resolve_baseline(baseline, jobs, ["retriever"], "compare.baselines")
    assert why in str(error.value)


def test_each_delta_says_against_which_baseline(jobs: list[FinishedJob]) -> None:
    values = {
        "recall@K": {
            j.label: {t: j.per_query("final", "recall@K") for t in ("t", ALL)} for j in jobs
        }
    }
    metrics = [{"spec": "recall@K"}]
    cfg = CompareConfig(n_resamples=1000)
    against = []
    for baseline in ({ANY_KEY: "bm25"}, {"retriever": "dense"}):
        ab = build_ablation(jobs, ["retriever"], baseline, metrics, values, ["t", ALL], cfg)
        deltas = ab["groups"][0]["deltas"]["recall@K"]["t"]
        against.append((ab["against"], {d["against"] for d in deltas}, len(deltas)))
    assert against == [
        ("retriever=bm25", {"retriever=bm25"}, 2),
        ("retriever=dense", {"retriever=dense"}, 2),
    ]


def test_the_sweep_overrides_refuse_a_baseline_before_any_job() -> None:
    swept = {"retriever": ["bm25", "dense"], "top_k": ["6", "8"]}
    check_sweep([{ANY_KEY: "dense"}, {"top_k": 8}], swept, "compare.baselines")
    for baseline, why in (
        ({ANY_KEY: "colbert"}, "no varying key takes it"),
        ({"top_k": "10"}, "top_k takes 6, 8"),
        ({"bm25.k1": "0.9"}, "bm25.k1 does not vary"),
    ):
        with pytest.raises(ConfigError, match=r"compare\.baselines") as error:
            check_sweep([baseline], swept, "compare.baselines")
        assert why in str(error.value)
    # A glob sweep may take any value: only what is certain is refused.
    check_sweep([{"bm25.k1": "0.9"}, {ANY_KEY: "x"}], swept, "compare.baselines", False)
    with pytest.raises(ConfigError, match="several varying keys"):
        check_sweep([{ANY_KEY: "6"}], {"top_k": ["6"], "rrf_k": ["6"]}, "compare.baselines")


@pytest.mark.slow
def test_a_sweep_with_a_baseline_not_in_it_exits_2_before_its_jobs(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    proc = run_app(
        [
            "-m",
            "retriever=bm25,dense",
            "compare.baselines=[bm25,colbert]",
            *mini_overrides(tmp_path),
            f"hydra.sweep.dir={sweep}",
        ],
        cwd=ROOT,
    )
    assert proc.returncode == 2, proc.stderr
    assert "config key 'compare.baselines': 'colbert' is not in the sweep" in proc.stderr
    assert not any(p.is_dir() for p in sweep.glob("*")), "no job ran"


def test_a_baseline_of_several_keys_names_one_job() -> None:
    """Jobs varying retriever and top_k, three of the four pairs: a baseline names a job only
    when one job has every key's value (bm25 and dense run, top_k 8 runs, but not dense at
    top_k 8), and its deltas are taken against that job alone."""
    jobs = [
        _job("a", "bm25", 6, {f"q{i}": 0.0 for i in range(12)}),
        _job("b", "dense", 6, {f"q{i}": 1.0 for i in range(12)}),
        _job("c", "bm25", 8, {f"q{i}": 0.5 for i in range(12)}),
    ]
    assign_labels(jobs)
    keys = ["retriever", "top_k"]
    with pytest.raises(ConfigError, match="retriever=dense,top_k=8 is not in the sweep"):
        resolve_baseline({"retriever": "dense", "top_k": 8}, jobs, keys, "compare.baselines")
    spec = {"retriever": "bm25", "top_k": 6}
    assert resolve_baseline(spec, jobs, keys, "k") == {"retriever": "bm25", "top_k": "6"}
    values = {
        "recall@K": {
            j.label: {t: j.per_query("final", "recall@K") for t in ("t", ALL)} for j in jobs
        }
    }
    ab = build_ablation(jobs, keys, spec, [{"spec": "recall@K"}], values, ["t", ALL],
                        CompareConfig(n_resamples=1000))  # fmt: skip
    [group] = ab["groups"]
    assert group["baseline"] == {"label": jobs[0].label, "setting": "retriever=bm25,top_k=6"}
    assert [s["setting"] for s in group["settings"]] == [
        "retriever=dense,top_k=6",
        "retriever=bm25,top_k=8",
    ]
    deltas = group["deltas"]["recall@K"]["t"]
    assert {d["against"] for d in deltas} == {jobs[0].label}
    assert sorted(d["diff"] for d in deltas) == [0.5, 1.0]
