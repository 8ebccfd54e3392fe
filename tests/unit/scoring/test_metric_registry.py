"""One metric registry: a measure declared from outside the package (one function plus its
`register_measure` call, activated by `scoring.plugins`) is scored and appears in metrics.json,
results.csv, report.md, `run.compare`'s table and gate validation without any other edit; a
misspelt metric name is refused with the nearest one, never skipped."""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from conftest import compose_config, mini_overrides, run_in_process

from retrieval_bench.benchmark.gate import IMPROVED, REGRESSION, Check, decide, run_gate
from retrieval_bench.benchmark.history import JobKey
from retrieval_bench.config.benchmark import BenchmarkConfig, GateConfig
from retrieval_bench.data.trec import write_qrels, write_run
from retrieval_bench.errors import ConfigError
from retrieval_bench.jobdir.read import FinishedJob
from retrieval_bench.scoring import registry
from retrieval_bench.scoring.aggregate import per_query_columns
from retrieval_bench.scoring.measure_names import canonical_benchmark_metrics
from retrieval_bench.scoring.registry import lower_is_better
from retrieval_bench.stats.settings import SignificanceSettings
from retrieval_bench.stats.verdicts import verdict_cells
from run.compare import main as compare_main
from run.score import main as score_main

PLUGIN = "outside_metrics"
PLUGIN_SOURCE = '''
"""A user's own measure, outside the package: one function and its registration."""
from retrieval_bench.scoring.metrics import mrr
from retrieval_bench.scoring.registry import register_measure


def rr_squared(rg):
    """mrr squared: a made-up measure that punishes a late first hit harder."""
    return mrr(rg) ** 2


register_measure("rr_squared", rr_squared, condensed=True, description="mrr squared")
'''


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The plugin module on the path; its measure is unregistered afterwards."""
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / f"{PLUGIN}.py").write_text(PLUGIN_SOURCE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(folder))
    yield PLUGIN
    registry.unregister_measure("rr_squared")
    sys.modules.pop(PLUGIN, None)


def _overrides(tmp_path: Path, *extra: str) -> list[str]:
    return [*mini_overrides(tmp_path), "retriever=bm25", *extra]


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_an_outside_measure_reaches_every_output_and_the_gate(
    plugin: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    activate = f"scoring.plugins=[{plugin}]"
    result, job_a = run_in_process(_overrides(tmp_path, activate), tmp_path / "a")
    _, job_b = run_in_process(_overrides(tmp_path, activate, "arms.bm25.k1=0.3"), tmp_path / "b")

    # metrics.json: per query it is mrr squared, overall their mean, readable and condensed too.
    metrics = json.loads((job_a / "metrics.json").read_text())
    final = metrics["stages"]["final"]
    per_query = final["per_query"]
    assert per_query, "the fixture scores some queries"
    for row in per_query.values():
        assert row["rr_squared@6"] == row["mrr@6"] ** 2
    want = np.mean([row["mrr@6"] ** 2 for row in per_query.values()])
    assert final["overall"]["rr_squared@6"] == pytest.approx(want, rel=1e-12, abs=0)
    assert "rr_squared_condensed@6" in final["overall"]
    readable = final["families"]["readable"]["overall"]
    assert "readable_rr_squared@6" in readable and "readable_rr_squared@6" in final["overall"]
    assert (
        result.metrics["stages"]["final"]["overall"]["rr_squared@6"]
        == (final["overall"]["rr_squared@6"])
    )

    # results.csv: one row per scored query and the overall row, with metrics.json's values.
    with (job_a / "results.csv").open(encoding="utf-8") as handle:
        rows = [r for r in csv.DictReader(handle) if r["metric"] == "rr_squared@6"]
    overall = [r for r in rows if r["scope"] == "overall" and r["stage"] == "final"]
    assert [float(r["value"]) for r in overall] == [final["overall"]["rr_squared@6"]]
    final_queries = {r["query_id"] for r in rows if r["scope"] == "query" and r["stage"] == "final"}
    assert final_queries == set(per_query)

    # report.md: a column of the stage tables and of the label-coverage table.
    report = (job_a / "report.md").read_text()
    headers = [line for line in report.splitlines() if line.startswith("| type | n | recall@6 ")]
    assert headers and all(line.endswith("| judged@6 | rr_squared@6 |") for line in headers)
    assert "rr_squared_condensed@6" in report

    # run.compare's table (the plugin named by --plugin, as another process would need).
    out = tmp_path / "cmp"
    args = [str(job_a), str(job_b), "--plugin", plugin, "--metric", "rr_squared@K"]
    assert compare_main([*args, "--out", str(out)]) == 0
    assert "\nrr_squared@6\n" in capsys.readouterr().out  # the table of the measure
    comparison = json.loads((out / "comparison.json").read_text())["datasets"]["mini"]
    assert [m["spec"] for m in comparison["metrics"]] == ["rr_squared@K"]
    assert comparison["cells"]["rr_squared@K"]["all"]["n"] == len(per_query)

    # The gate: the tolerance validates, and the check reads the measure's per-query values.
    benchmark = BenchmarkConfig(enabled=True, gate=GateConfig(tolerances={"rr_squared@K": 0.01}))
    canonical_benchmark_metrics(benchmark)
    key = JobKey("mini", "bm25")
    before, after = FinishedJob.load(job_a), FinishedJob.load(job_b)
    gate = run_gate({key: after}, {key: before}, benchmark.gate, SignificanceSettings())
    everything = next(c for c in gate.checks if c.query_type == "all")
    assert (everything.metric, everything.metric_after) == ("rr_squared@K", "rr_squared@6")
    assert everything.before == pytest.approx(want, rel=1e-12, abs=0)


def test_a_typo_of_a_plugin_measure_is_refused_with_its_nearest_name(
    plugin: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError) as err:
        compose_config(
            _overrides(tmp_path, f"scoring.plugins=[{plugin}]", "compare.metrics=[rr_sqaured@K]")
        )
    assert str(err.value) == (
        "config key 'compare.metrics[0]': 'rr_sqaured@K' is not a metric: "
        "did you mean 'rr_squared@K'?"
    )
    gate = GateConfig(tolerances={"recall@K": 0.02, "rr_sqaured@K": 0.01})
    with pytest.raises(ConfigError) as err:
        canonical_benchmark_metrics(BenchmarkConfig(enabled=True, gate=gate))
    assert str(err.value) == (
        "config key 'benchmark.gate.tolerances.rr_sqaured@K': 'rr_sqaured@K' is not a metric: "
        "did you mean 'rr_squared@K'?"
    )


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["compare.metrics=[ndgc@K]"],
            "config key 'compare.metrics[0]': 'ndgc@K' is not a metric: did you mean 'ndcg@K'?",
        ),
        (
            ["compare.metrics=[rr_squared@K]"],  # not registered: no plugin names it
            "config key 'compare.metrics[0]': 'rr_squared@K' is not a metric: known: recall, ",
        ),
        (
            ["experiment=monthly", "benchmark.trend_metrics=[recall@K,ndgc@K]"],
            "config key 'benchmark.trend_metrics[1]': 'ndgc@K' is not a metric: "
            "did you mean 'ndcg@K'?",
        ),
        (
            ["scoring.plugins=[no_such_metrics_module]"],
            "config key 'scoring.plugins[0]': cannot import 'no_such_metrics_module': "
            "No module named 'no_such_metrics_module'",
        ),
    ],
)
def test_unknown_metric_names_and_plugins_are_refused(
    tmp_path: Path, overrides: list[str], message: str
) -> None:
    with pytest.raises(ConfigError) as err:
        compose_config(_overrides(tmp_path, *overrides))
    assert str(err.value).startswith(message)


def test_run_compare_refuses_a_plugin_it_cannot_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert compare_main([str(tmp_path), "--plugin", "no_such_metrics_module"]) == 2
    assert "config key '--plugin[0]': cannot import 'no_such_metrics_module'" in (
        capsys.readouterr().err
    )


@pytest.mark.parametrize(
    ("name", "ir_measures", "message"),
    [
        ("ndcg", None, "measure name 'ndcg' is taken"),
        ("readable_rr", None, "measure name 'readable_rr' is taken"),
        ("rr_condensed", None, "measure name 'rr_condensed' is taken"),
        ("leak_any", None, "measure name 'leak_any' is taken"),
        ("Bad-Name", None, "measure name 'Bad-Name': lower-case letters, digits and _ only"),
        ("rr2", "nDCG", "ir_measures spelling 'nDCG' is taken"),
        ("source_coverage", None, "measure name 'source_coverage' is taken"),  # an answer metric
    ],
)
def test_a_registration_that_would_shadow_a_name_is_refused(
    name: str, ir_measures: str | None, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        registry.register_measure(name, lambda rg: rg.hit_counts, ir_measures=ir_measures)
    assert "rr2" not in registry.known_metrics()


def test_only_computes_the_measures_asked_for_with_the_same_values() -> None:
    rankings = [["a", "x", "b"], ["y", "c"], ["z"]]
    qrels = [{"a": 1, "b": 2, "q": 0}, {"c": 3}, {"w": 1}]
    full = per_query_columns(rankings, qrels, [1, 2])
    some = per_query_columns(rankings, qrels, [1, 2], only={"ndcg", "mrr_condensed"})
    assert set(some) == {"n_relevant", "hits@1", "hits@2", "ndcg@1", "ndcg@2"} | {
        "mrr_condensed@1",
        "mrr_condensed@2",
    }
    for name, column in some.items():
        np.testing.assert_array_equal(column, full[name], err_msg=name)


def test_every_reported_name_resolves_to_its_declaration() -> None:
    assert registry.find("readable_ndcg_condensed@10").name == "ndcg"
    assert registry.lower_is_better("leak_pooled@3") is True
    assert registry.lower_is_better("readable_hit_condensed@3") is False
    with pytest.raises(KeyError):
        registry.find("leak_condensed@3")  # only doc measures have condensed variants


@pytest.mark.parametrize(
    ("metric", "change", "status"),
    [
        ("recall@K", -0.5, REGRESSION),
        ("recall@K", +0.5, IMPROVED),
        ("leak_any@K", +0.5, REGRESSION),  # more leaks: worse, whatever the sign
        ("leak_any@K", -0.5, IMPROVED),
    ],
)
def test_the_gate_reads_each_measures_direction_from_the_registry(
    metric: str, change: float, status: str
) -> None:
    gate = GateConfig(tolerances={metric: 0.02})
    name = metric.replace("@K", "@6")
    check = Check("synth", "bm25", metric, name, name, "all", 20, 0, 0.5, 0.5 + change, change,
                  change, change, 1e-4, 1e-4, 0.02)  # fmt: skip
    decide([check], gate, SignificanceSettings(), min_queries=5)
    assert check.status == status
    if status == REGRESSION:
        assert "(drop 0.500 > tolerance 0.02;" in check.message()


def _teaching_files(tmp_path: Path) -> list[str]:
    """Three queries: A finds a (rank 1), b (3), c (4) of a, b, c; B finds d at rank 2; C none."""
    qrels = {"A": {"a": 1, "b": 1, "c": 1}, "B": {"d": 1}, "C": {"e": 1}}
    run = {"A": ["a", "x", "b", "c"], "B": ["x", "d"], "C": ["x", "y"]}
    write_qrels(tmp_path / "qrels.trec", qrels)
    write_run(
        tmp_path / "r.run", {q: [(d, 10.0 - i) for i, d in enumerate(r)] for q, r in run.items()}
    )
    return [str(tmp_path / "qrels.trec"), str(tmp_path / "r.run")]


def test_run_score_prints_the_metrics_asked_for_plugins_included(
    plugin: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [*_teaching_files(tmp_path), "-k", "2", "-k", "4", "--json", "--plugin", plugin]
    assert score_main([*args, "--metric", "RR@K", "--metric", "rr_squared@2"]) == 0
    overall = json.loads(capsys.readouterr().out)["overall"]
    # mrr per query @2: 1, 1/2, 0; @4 the same. rr_squared@2: 1, 1/4, 0.
    assert overall == {
        "n": 3,
        "mrr@2": pytest.approx(0.5, abs=1e-15),
        "mrr@4": pytest.approx(0.5, abs=1e-15),
        "rr_squared@2": pytest.approx(1.25 / 3, abs=1e-15),
    }


@pytest.mark.parametrize(
    ("metric", "message"),
    [
        ("ndgc@2", "config key '--metric[0]': 'ndgc@2' is not a metric: did you mean 'ndcg@2'?"),
        ("ndcg@3", "config key '--metric[0]': 'ndcg@3': cut-off 3 is not scored; add -k 3"),
        ("leak@2", "config key '--metric[0]': leak@2 is not a doc metric run.score reports"),
    ],
)
def test_run_score_refuses_an_unknown_metric_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], metric: str, message: str
) -> None:
    assert score_main([*_teaching_files(tmp_path), "-k", "2", "--metric", metric]) == 2
    assert message in capsys.readouterr().err


def test_the_comparison_takes_the_lowest_leak_as_best() -> None:
    queries = [f"q{i:02d}" for i in range(20)]
    values = {
        "leaky": {"all": dict.fromkeys(queries, 0.5)},
        "tight": {"all": dict.fromkeys(queries, 0.0)},
    }
    table = {(metric, "all"): {k: v["all"] for k, v in values.items()} for metric in ("leak@K",)}
    sig = SignificanceSettings(n_resamples=1000)
    cell = verdict_cells(table, sig, 5, lower_is_better=lambda key: lower_is_better(key[0]))[
        ("leak@K", "all")
    ]
    assert (cell.best, cell.verdicts) == ("tight", {"tight": "win", "leaky": "lose"})


def test_only_doc_measures_come_from_outside() -> None:
    with pytest.raises(ValueError, match="'leak_max': only doc measures can be registered"):
        registry.register_measure(registry.Measure("leak_max", family="leak"))
    assert "leak_max" not in registry.known_metrics()


@pytest.fixture
def raising_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A plugin module that raises while it is imported (a bug in the user's own code)."""
    (tmp_path / "broken_metrics.py").write_text(
        "raise RuntimeError('the judge model path is not set')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return "broken_metrics"


def test_a_plugin_that_raises_on_import_is_bad_input_naming_module_and_message(
    tmp_path: Path, raising_plugin: str, capsys: pytest.CaptureFixture[str]
) -> None:
    says = "'broken_metrics' raised RuntimeError: the judge model path is not set"
    with pytest.raises(ConfigError) as err:
        compose_config(_overrides(tmp_path, f"scoring.plugins=[{raising_plugin}]"))
    assert str(err.value) == f"config key 'scoring.plugins[0]': importing {says}"
    run = tmp_path / "x.run"
    run.write_text("q1 Q0 d1 1 1.0 t\n")
    qrels = tmp_path / "x.qrels"
    qrels.write_text("q1 0 d1 1\n")
    for main, argv in (
        (compare_main, [str(tmp_path), "--plugin", raising_plugin]),
        (score_main, [str(qrels), str(run), "-k", "1", "--plugin", raising_plugin]),
    ):
        assert main(argv) == 2
        err_text = capsys.readouterr().err
        assert f"error: config key '--plugin[0]': importing {says}" in err_text
        assert "Traceback" not in err_text
