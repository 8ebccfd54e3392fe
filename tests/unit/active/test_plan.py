"""A labelling plan end to end on travel: two bm25 jobs pooled, the pool graded by the stand-in
chat model (tests/support/judge_server.py) and imported, a two-round plan drawn, each round's
pool filled by a scripted annotator and imported with `run.pool --import`, the next round drawn
on what came back, and the estimates checked against the formulas applied by hand to the plan's
own records and the scorer's per-query values; bad input exits 2 naming what is wrong."""

from __future__ import annotations

import json
import shutil
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import compose_config, config_record
from support.datasets import read_jsonl
from support.judge_server import chat_model, rule_grade
from support.judging import TRAVEL, TRAVEL_CORPUS

from retrieval_bench.active.context import PlanError
from retrieval_bench.active.plan import PlanSettings, _round_hash, read_plan
from retrieval_bench.errors import ConfigError
from retrieval_bench.job.runner import run_job
from retrieval_bench.jobdir.write import write_job
from retrieval_bench.scoring.run_scores import score
from run.compare import main as compare_main
from run.judge import main as judge_main
from run.label import main as label_main
from run.pool import main as pool_main


def _people_grade(record: dict[str, Any]) -> int:
    """The scripted annotator: the stand-in judge's rule at grade 2, overruled on a fixed
    eighth of the pairs (people and the judge disagree there)."""
    title = record.get("title") or ""
    passage = f"{title}\n{record['text']}" if title else record["text"]
    grade = int(rule_grade(record["query"], passage) >= 2)
    flip = zlib.crc32(f"{record['query_id']}/{record['id']}".encode()) % 8 == 0
    return 1 - grade if flip else grade


def _fill(pool: Path, out: Path) -> Path:
    rows = read_jsonl(pool)
    for row in rows:
        row["grade"] = _people_grade(row)
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return out


def _import(filled: Path, evalset: Path, out: Path) -> Path:
    args = ["--import", str(filled), "--evalset", str(evalset), "--corpus", str(TRAVEL_CORPUS)]
    assert pool_main([*args, "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(a sweep of two bm25 jobs on travel, b 0.75 and 0.2, top_k 6; a snapshot of travel with
    the stand-in judge's grades of their pool)."""
    tmp = tmp_path_factory.mktemp("plan")
    evalset = tmp / "travel.jsonl"
    shutil.copy(TRAVEL, evalset)
    for i, b in enumerate(("0.75", "0.2")):
        cfg = compose_config(
            [
                "retriever=bm25",
                f"arms.bm25.b={b}",
                f"dataset.evalset={evalset}",
                f"cache_dir={tmp / 'cache'}",
                "top_k=6",
            ]
        )
        write_job(tmp / "sweep" / str(i), run_job(cfg), config_record(cfg))
    assert pool_main([str(tmp / "sweep"), "--depth", "6"]) == 0
    judgments = tmp / "judgments.jsonl"
    with chat_model() as (url, _):
        args = ["--judge", "openai", "--url", url, "--model", "stand-in"]
        args += ["--cache-dir", str(tmp / "cache"), "--out", str(judgments)]
        assert judge_main([str(tmp / "sweep" / "pool.jsonl"), *args]) == 0
    return tmp / "sweep", _import(judgments, evalset, tmp / "judged.jsonl")


def _plan(sweep: Path, labels: Path, out: Path, *extra: str) -> int:
    return label_main(
        ["plan", str(sweep), "--labels", str(labels), "--budget", "40", "--out", str(out), *extra]
    )


@pytest.mark.slow  # whole jobs in process, a chat model on 127.0.0.1
def test_a_two_round_plan_is_drawn_filled_and_estimated(
    judged: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep, snapshot = judged
    plan_dir = tmp_path / "plan"
    assert _plan(sweep, snapshot, plan_dir, "--seed", "3") == 0
    plan = read_plan(plan_dir)
    first = plan["rounds"][0]
    assert first["strategy_used"] == "uniform" and first["coefficients"] is None  # the pilot
    assert len(set(first["pi"].values())) == 1
    assert sum(first["pi"].values()) == pytest.approx(0.3 * 40)
    pool = read_jsonl(plan_dir / "round-1" / "pool.jsonl")
    assert {r["query_id"] for r in pool} == set(first["chosen"])
    assert all(r["inclusion_probability"] == first["pi"][r["query_id"]] for r in pool)
    assert all(r["plan_round"] == 1 and r["grade"] is None for r in pool)
    assert (plan_dir / "round-1" / "pool.csv").is_file()

    # Round 2 before round 1's labels came back: refused, naming how many are missing.
    capsys.readouterr()
    assert label_main(["next", str(plan_dir), "--labels", str(snapshot)]) == 2
    assert "have no people's grade yet" in capsys.readouterr().err

    after1 = _import(
        _fill(plan_dir / "round-1" / "pool.jsonl", tmp_path / "filled-1.jsonl"),
        snapshot,
        tmp_path / "after-1.jsonl",
    )
    # An estimate after round 1 alone: valid, its weight renormalised, and said.
    capsys.readouterr()
    early = ["estimate", str(plan_dir), "--labels", str(after1), "--out", str(tmp_path)]
    assert label_main(early) == 0
    assert "1 of 2 planned rounds drawn" in capsys.readouterr().out
    assert json.loads((tmp_path / "estimate.json").read_text(encoding="utf-8"))["weights"] == [1.0]
    assert label_main(["next", str(plan_dir), "--labels", str(after1)]) == 0
    plan = read_plan(plan_dir)
    second = plan["rounds"][1]
    assert second["calibration"]["pairs"] >= 30  # round 1's pairs: people's grade, judge's beside
    assert second["strategy_used"] == "active" and second["prediction"] is not None
    assert not set(second["pi"]) & set(first["chosen"])  # round 1's queries are known now
    assert sum(second["pi"].values()) == pytest.approx(0.7 * 40)
    assert min(second["pi"].values()) >= 0.2 * 28 / len(second["pi"]) - 1e-12  # the floor
    after2 = _import(
        _fill(plan_dir / "round-2" / "pool.jsonl", tmp_path / "filled-2.jsonl"),
        after1,
        tmp_path / "after-2.jsonl",
    )
    assert label_main(["estimate", str(plan_dir), "--labels", str(after2)]) == 0
    record = json.loads((plan_dir / "estimate.json").read_text(encoding="utf-8"))
    assert (plan_dir / "estimate.md").is_file() and not record["warnings"]
    rows = {(r["type"], r["quantity"], r["estimator"]): r for r in record["rows"]}

    # By hand: per-query nDCG@6 under the final labels, from the scorer on each job's run.
    a, b = record["systems"]
    runs = [sweep / "0" / "trec" / "final.run", sweep / "1" / "trec" / "final.run"]
    per = [score(after2, run, ["ndcg@6"]).per_query for run in runs]
    queries = plan["queries"]
    y = np.array([per[0][q]["ndcg@6"] - per[1][q]["ndcg@6"] for q in queries])
    n = len(queries)
    known0 = set(plan["certain"])
    # Round 1 (people only): the regression estimate without the judge, i.e. c tuned, lam 0:
    # sum over its sample of w y / sum w with w = (1 - pi)/pi^2 (every pi alike: the mean of
    # the chosen queries' y, known ones excepted), then the difference estimate around it.
    pi1 = np.array([1.0 if q in known0 else first["pi"][q] for q in queries])
    s1 = np.array([q in known0 or q in set(first["chosen"]) for q in queries])
    w = np.where(s1, (1 - pi1) / pi1**2, 0.0)
    c1 = (w * np.where(s1, y, 0)).sum() / w.sum()
    m1 = c1 + (np.where(s1, y - c1, 0) / pi1).sum() / n
    fit_n = int((s1 & (pi1 < 1)).sum())
    v1 = (w * np.where(s1, y - c1, 0) ** 2).sum() / n**2 * fit_n / (fit_n - 1)
    # Round 2: c fitted on round 1's queries (and those known before), with the round's design
    # weights (a weighted mean of their y), recorded in the plan.
    c2 = second["coefficients"]["difference"]["people"][1]
    known1 = known0 | set(first["chosen"])
    known_y = [y[i] for i, q in enumerate(queries) if q in known1]
    assert min(known_y) <= c2 <= max(known_y)
    pi2 = np.array([1.0 if q in known1 else second["pi"][q] for q in queries])
    s2 = np.array([q in known1 or q in set(second["chosen"]) for q in queries])
    m2 = c2 + (np.where(s2, y - c2, 0) / pi2).sum() / n
    v2 = ((1 - pi2) / pi2**2 * np.where(s2, y - c2, 0) ** 2).sum() / n**2
    # The weights round 2 recorded when it was drawn: each round's predicted variance, inverted.
    w1, w2 = second["weights"]
    assert w1 + w2 == pytest.approx(1.0) and 0 < w1 < 1
    assert record["weights"] == [w1, w2]
    people = rows[("all", "difference", "people")]
    assert people["mean"] == pytest.approx(w1 * m1 + w2 * m2, abs=1e-9)
    assert people["se"] == pytest.approx(np.sqrt(w1**2 * v1 + w2**2 * v2), abs=1e-9)
    active = rows[("all", "difference", "active")]
    assert active["uses_judge"] and active["n"] == len(known1 | set(second["chosen"]))
    assert active["verdict"] in (a, b, "tie")
    assert rows[("all", a, "active")]["ci_low"] <= rows[("all", a, "active")]["mean"]
    # The whole set under the final labels lies where a 95% interval may put it.
    truth = y.mean()
    assert abs(active["mean"] - truth) < 4 * active["se"] + 1e-9

    # The comparison with compare.estimate=active: the same estimates, and their verdict.
    capsys.readouterr()
    compare = ["--judged-labels", str(after2), "--estimate", "active", "--label-plan"]
    assert compare_main([str(sweep), *compare, str(plan_dir), "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert f"verdict {active['verdict']}" in printed and "label plan (ndcg@6" in printed
    comparison = json.loads((tmp_path / "comparison.json").read_text(encoding="utf-8"))
    (dataset,) = comparison["datasets"].values()
    assert dataset["active_estimates"]["rows"] == record["rows"]
    assert "Estimates under the label plan" in (tmp_path / "comparison.md").read_text("utf-8")
    assert compare_main([str(sweep), "--estimate", "active"]) == 2  # no --label-plan

    # Labels that come back for queries the plan did not choose: ignored, and said.
    extra = [r for r in read_jsonl(sweep / "pool.jsonl") if r["query_id"] not in known1]
    extra = [r for r in extra if r["query_id"] not in set(second["chosen"])][:3]
    outside = tmp_path / "outside.jsonl"
    outside.write_text(
        "".join(
            json.dumps(r | {"grade": _people_grade(r)}, ensure_ascii=False) + "\n" for r in extra
        ),
        "utf-8",
    )
    after3 = _import(outside, after2, tmp_path / "after-3.jsonl")
    capsys.readouterr()
    assert (
        label_main(["estimate", str(plan_dir), "--labels", str(after3), "--out", str(tmp_path)])
        == 0
    )
    assert "the plan did not choose are ignored" in capsys.readouterr().out
    again = json.loads((tmp_path / "estimate.json").read_text(encoding="utf-8"))
    assert again["rows"] == record["rows"]


@pytest.mark.slow  # the judged sweep above
def test_bad_plans_exit_2_naming_what_is_wrong(
    judged: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep, snapshot = judged
    for extra, message in [
        (["--budget", "0"], "'--budget': must be a positive"),
        (["--budget", "-3"], "'--budget': must be a positive"),
        (["--budget", "100000"], "only"),
        (["--floor", "0"], "--floor"),
        (["--metric", "ndcg"], "--metric"),
    ]:
        capsys.readouterr()
        args = ["plan", str(sweep), "--labels", str(snapshot), "--out", str(tmp_path / "x")]
        assert label_main([*args, "--budget", "10", *extra]) == 2, extra
        assert message in capsys.readouterr().err, extra
    plan_dir = tmp_path / "plan"
    assert _plan(sweep, snapshot, plan_dir) == 0
    assert _plan(sweep, snapshot, plan_dir) == 2  # a plan is there already
    # A probability edited after the draw: the round's hash no longer matches.
    path = plan_dir / "plan.json"
    plan = json.loads(path.read_text(encoding="utf-8"))
    query = next(iter(plan["rounds"][0]["pi"]))
    plan["rounds"][0]["pi"][query] = 0.9
    path.write_text(json.dumps(plan), encoding="utf-8")
    capsys.readouterr()
    assert label_main(["estimate", str(plan_dir), "--labels", str(snapshot)]) == 2
    assert "round 1 was edited" in capsys.readouterr().err
    # ... and re-hashed by hand: the seed no longer draws the chosen queries from them.
    plan["rounds"][0]["pi"] = {q: 0.0 for q in plan["rounds"][0]["pi"]}
    plan["rounds"][0]["sha256"] = _round_hash(plan["rounds"][0])
    path.write_text(json.dumps(plan), encoding="utf-8")
    with pytest.raises(PlanError, match="not what its seed and probabilities draw"):
        read_plan(plan_dir)


def test_plan_settings_refuse_bad_values() -> None:
    for settings, flag in [
        (PlanSettings(budget=0), "--budget"),
        (PlanSettings(budget=50), "--budget"),
        (PlanSettings(budget=5, strategy="greedy"), "--strategy"),
        (PlanSettings(budget=5, unit="pair"), "--unit"),
        (PlanSettings(budget=5, rounds=0), "--rounds"),
        (PlanSettings(budget=5, first_share=1.0), "--first-share"),
        (PlanSettings(budget=5, floor=1.5), "--floor"),
    ]:
        with pytest.raises(ConfigError) as info:
            settings.check(candidates=20)
        assert info.value.key == flag
    assert PlanSettings(budget=10, rounds=3, first_share=0.4).round_budgets() == [4.0, 3.0, 3.0]
    assert PlanSettings(budget=10, rounds=1).round_budgets() == [10.0]


@pytest.mark.slow  # the judged sweep above, a chat model on 127.0.0.1
def test_the_simulation_command_writes_its_table(
    judged: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep, _ = judged
    out = tmp_path / "sim"
    with chat_model() as (url, _):
        judge = ["--judge", "openai", "--url", url, "--model", "stand-in"]
        judge += ["--cache-dir", str(tmp_path / "cache")]
        base = ["simulate", str(sweep), *judge, "--draws", "60", "--second-draws", "6"]
        base += ["--mc-draws", "4"]
        assert label_main([*base, "--budgets", "30,60", "--out", str(out)]) == 0
        printed = capsys.readouterr().out
        assert "## The paired difference" in printed and "Queries needed" in printed
        result = json.loads((out / "simulation.json").read_text(encoding="utf-8"))
        assert (out / "simulation.md").read_text(encoding="utf-8") in printed
        assert result["settings"]["draws"] == 60 and not result["judge"]["shuffled"]
        rows = [r for r in result["rows"] if r["quantity"] == "difference"]
        # budgets x (strategies x estimators + the one-round uniform reference)
        assert len(rows) == 2 * (4 * 2 + 1)
        assert all(r["draws"] == 60 and 0 <= r["coverage"] <= 1 for r in rows)
        assert {r["budget"] for r in result["labels_needed"]} == {30, 60}
        # The control: the judge's verdicts shuffled over the pairs.
        shuffled = tmp_path / "shuffled"
        assert (
            label_main([*base, "--budgets", "30", "--shuffle-judge", "--out", str(shuffled)]) == 0
        )
        assert json.loads((shuffled / "simulation.json").read_text())["judge"]["shuffled"]
        # Bad input: a budget above the queries the jobs share, draws not a multiple.
        capsys.readouterr()
        assert label_main([*base, "--budgets", "100000"]) == 2
        assert "--budgets" in capsys.readouterr().err
        assert (
            label_main([*base[:-4], "--draws", "65", "--second-draws", "6", "--budgets", "30"]) == 2
        )
        assert "--draws" in capsys.readouterr().err
