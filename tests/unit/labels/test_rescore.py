"""Label snapshots and re-scoring: the labels hash a job records, `python -m run.rescore` on
stored rankings (unchanged labels reproduce metrics.json; changed labels give a fresh job's
metrics; a changed corpus or changed queries are refused), the monthly gate re-scoring a
baseline scored against other labels, and the trend marking label changes.

Jobs are run in-process on the small fixture (bm25, and router=rules for baselines, router
metrics and every family) and written as the app writes them.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import FIXTURE, ROOT, compose_config, config_record, mini_overrides
from omegaconf import OmegaConf

from retrieval_bench.benchmark.history import month_jobs
from retrieval_bench.benchmark.month import gate_month
from retrieval_bench.benchmark.trend import write_trend
from retrieval_bench.config import RunConfig, register_configs
from retrieval_bench.config.benchmark import BenchmarkConfig, GateConfig
from retrieval_bench.data.evalset import load_evalset
from retrieval_bench.data.hashes import labels_hash, short
from retrieval_bench.errors import ConfigError
from retrieval_bench.job.runner import run_job
from retrieval_bench.jobdir.names import RESCORE_NOTE, RESCORED_METRICS
from retrieval_bench.jobdir.read import RescoreError
from retrieval_bench.jobdir.write import write_job
from retrieval_bench.labels.rescore import rescore_job
from retrieval_bench.records import Dataset
from run.monthly import print_gate
from run.rescore import main as rescore_main

register_configs()
EVALSET = FIXTURE / "evalsets" / "mini.jsonl"
# Label edits of a new snapshot: a query type, a label status, a relevant id added, a graded
# and a grade-0 judgement, a gold id missing from the corpus removed.
RELABEL: dict[str, dict[str, Any]] = {
    "m02": {"relevance": {"hk-hsy-park": 0}},
    "m03": {"relevant_ids": ["sy-ylw-beach", "sy-ylw-forest"], "relevance": {"sy-ylw-beach": 2}},
    "m06": {"query_type": "fuzzy_intent"},
    "m08": {"label_status": "reviewed", "relevant_ids": ["sy-ylw-beach"]},
    "m09": {"relevant_ids": ["wn-xlb-food"]},
}


def as_json(value: Any) -> Any:
    """As metrics.json holds it (tuples as lists, keys as strings)."""
    return json.loads(json.dumps(value))


def evalset_records(path: Path = EVALSET) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def write_evalset(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8"
    )
    return path


def relabelled(path: Path) -> Path:
    return write_evalset(path, [{**r, **RELABEL.get(r["query_id"], {})} for r in evalset_records()])


def make_job(folder: Path, overrides: list[str]) -> Path:
    """A finished job folder as `python -m run` writes it, Hydra's .hydra/ files included."""
    cfg = compose_config(overrides)
    config = config_record(cfg)
    write_job(folder, run_job(cfg), config)
    (folder / ".hydra").mkdir()
    OmegaConf.save(config, folder / ".hydra" / "config.yaml")
    choices = {"dataset": "mini", "retriever": cfg.retriever.name}
    hydra = {"hydra": {"runtime": {"choices": choices}, "job": {"num": 0}}}
    (folder / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump(hydra))
    return folder


def metrics_of(job: Path, name: str = "metrics.json") -> dict[str, Any]:
    return json.loads((job / name).read_text(encoding="utf-8"))


ROUTER = ["router=rules", "scoring.cutoffs=[3]", "scoring.group_by=[query_length,user_role]"]


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A bm25 job and a router job on the fixture's labels, and the same two (fresh) on the
    relabelled snapshot."""
    tmp = tmp_path_factory.mktemp("rescore")
    snapshot = relabelled(tmp / "mini.v2.jsonl")
    base = [*mini_overrides(tmp), "retriever=bm25"]
    return {
        "bm25": make_job(tmp / "bm25", base),
        "router": make_job(tmp / "router", [*base, *ROUTER]),
        "bm25-v2": make_job(tmp / "bm25-v2", [*base, f"dataset.evalset={snapshot}"]),
        "router-v2": make_job(tmp / "router-v2", [*base, *ROUTER, f"dataset.evalset={snapshot}"]),
        "snapshot": snapshot,
    }


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_the_labels_hash_is_recorded_and_ignores_formatting_not_judgements(
    tmp_path: Path, jobs: dict[str, Path]
) -> None:
    def hashed(path: Path) -> str:
        return labels_hash(Dataset("mini", (), tuple(load_evalset(path))))

    manifest = metrics_of(jobs["bm25"], "manifest.json")
    assert manifest["labels"] == {"hash": hashed(EVALSET)}
    assert set(manifest) >= {"labels", "queries", "corpus"}
    # Reordered keys and lines, other spacing, free-form notes and meta: the same labels.
    records = [
        {**dict(reversed(list(r.items()))), "notes": "checked", "meta": {"by": "x"}}
        for r in reversed(evalset_records())
    ]
    reformatted = tmp_path / "reformatted.jsonl"
    reformatted.write_text(
        "\n\n".join(json.dumps(r, ensure_ascii=True, indent=None) for r in records) + "\n"
    )
    assert hashed(reformatted) == hashed(EVALSET)
    # One grade-0 judgement more (what an annotated pool adds): other labels.
    judged = [
        {**r, "relevance": {"hk-hsy-park": 0}} if r["query_id"] == "m01" else r
        for r in evalset_records()
    ]
    assert hashed(write_evalset(tmp_path / "judged.jsonl", judged)) != hashed(EVALSET)
    assert metrics_of(jobs["bm25-v2"], "manifest.json")["labels"]["hash"] == hashed(
        jobs["snapshot"]
    )


@pytest.mark.parametrize("name", ["bm25", "router"])
@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_rescoring_against_unchanged_labels_reproduces_metrics_json(
    jobs: dict[str, Path], name: str
) -> None:
    rescored = rescore_job(jobs[name])
    assert not rescored.labels_changed
    assert as_json(rescored.metrics) == metrics_of(jobs[name])


@pytest.mark.parametrize("name", ["bm25", "router"])
@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_rescoring_against_a_new_snapshot_gives_a_fresh_jobs_metrics(
    jobs: dict[str, Path], name: str
) -> None:
    rescored = rescore_job(jobs[name], evalset=jobs["snapshot"])
    fresh = metrics_of(jobs[f"{name}-v2"])
    assert as_json(rescored.metrics) == fresh
    # Not vacuous: the snapshot's labels score these rankings differently.
    assert fresh != metrics_of(jobs[name])
    assert rescored.labels_line() == (
        f"labels {short(rescored.before['labels']['hash'])} -> "
        f"{short(metrics_of(jobs[f'{name}-v2'], 'manifest.json')['labels']['hash'])}"
    )


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_cli_writes_rescored_metrics_beside_the_jobs_own(
    tmp_path: Path, jobs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    job = shutil.copytree(jobs["bm25"], tmp_path / "job")
    recorded = (job / "metrics.json").read_bytes()
    assert rescore_main([str(job), "--evalset", str(jobs["snapshot"])]) == 0
    assert (job / "metrics.json").read_bytes() == recorded
    assert metrics_of(job, RESCORED_METRICS) == metrics_of(jobs["bm25-v2"])
    note = metrics_of(job, RESCORE_NOTE)
    new_hash = metrics_of(jobs["bm25-v2"], "manifest.json")["labels"]["hash"]
    old_hash = metrics_of(job, "manifest.json")["labels"]["hash"]
    assert note["labels"] == {"then": old_hash, "now": new_hash}
    assert note["dataset"]["evalset"] == str(jobs["snapshot"])
    old, new = (
        metrics_of(j)["stages"]["final"]["overall"]["ndcg@6"] for j in (job, jobs["bm25-v2"])
    )
    assert capsys.readouterr().out == (
        f"{job}: labels {short(old_hash)} -> {short(new_hash)}; final ndcg@6 {old:.4f} -> "
        f"{new:.4f}; wrote {RESCORED_METRICS}, {RESCORE_NOTE}\n"
    )


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_a_job_whose_corpus_changed_is_refused_naming_it_and_both_hashes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = shutil.copytree(FIXTURE / "corpus" / "mini", tmp_path / "corpus")
    job = make_job(
        tmp_path / "job", [*mini_overrides(tmp_path), "retriever=bm25", f"dataset.corpus={corpus}"]
    )
    old = metrics_of(job, "manifest.json")["corpus"]["hash"]
    passages = corpus / "passages.jsonl"
    passages.write_text(passages.read_text(encoding="utf-8").replace("144元", "150元"))
    with pytest.raises(RescoreError) as refused:
        rescore_job(job)
    new = rescore_hashes_now(job)
    message = (
        f"{job}: its corpus changed since the job ran (corpus hash {short(old)} then, "
        f"{short(new)} now): its rankings are not what a job would retrieve now; re-run it instead"
    )
    assert str(refused.value) == message
    # The command: exit 2, that line, and nothing written.
    assert rescore_main([str(job)]) == 2
    assert capsys.readouterr().err == f"error: {message}\n"
    assert not (job / RESCORED_METRICS).exists() and not (job / RESCORE_NOTE).exists()


def rescore_hashes_now(job: Path) -> str:
    """The corpus hash of the job's corpus as it is now."""
    from retrieval_bench.data.hashes import corpus_hash
    from retrieval_bench.data.jsonl import file_sha256

    corpus = Path(yaml.safe_load((job / ".hydra" / "config.yaml").read_text())["dataset"]["corpus"])
    files = {p.name: file_sha256(p) for p in corpus.iterdir()}
    return corpus_hash(files, "native")


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_changed_queries_or_an_unhashed_job_are_refused(
    tmp_path: Path, jobs: dict[str, Path]
) -> None:
    # A query's text changed: its stored ranking is for another query.
    reworded = [
        {**r, "query": "蜈支洲岛门票"} if r["query_id"] == "m01" else r for r in evalset_records()
    ]
    with pytest.raises(RescoreError, match="the queries retrieval reads changed since the job ran"):
        rescore_job(jobs["bm25"], evalset=write_evalset(tmp_path / "reworded.jsonl", reworded))
    # A job recorded before the hashes: nothing to check its rankings against.
    old = shutil.copytree(jobs["bm25"], tmp_path / "old")
    manifest = metrics_of(old, "manifest.json")
    for key in ("labels", "queries", "corpus"):
        del manifest[key]
    (old / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(RescoreError) as refused:
        rescore_job(old)
    assert str(refused.value) == (
        f"{old}: recorded before label hashes (manifest.json has no labels.hash, queries.hash, "
        "corpus.hash): re-run the job to re-score it"
    )


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_another_datasets_evalset_is_refused_before_its_labels_are_judged(
    jobs: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    # The travel set's queries are not this job's: one line saying so, not a line per travel
    # query excluded because its relevant ids are not in this corpus first.
    travel = ROOT / "evalsets" / "travel.jsonl"
    with caplog.at_level("INFO"), pytest.raises(
        RescoreError, match="the queries retrieval reads changed since the job ran"
    ):
        rescore_job(jobs["bm25"], evalset=travel)
    assert [r.getMessage() for r in caplog.records if "excluded" in r.getMessage()] == []


# --- The monthly gate and the trend ------------------------------------------------------


def finished_month(root: Path, month: str, evalset: Path, gate: str | None) -> Path:
    month_dir = root / month
    make_job(
        month_dir / "mini" / "bm25",
        [*mini_overrides(root), "retriever=bm25", f"dataset.evalset={evalset}"],
    )
    (month_dir / "benchmark.json").write_text(json.dumps({"month": month, "status": "finished"}))
    if gate is not None:
        (month_dir / "gate.json").write_text(json.dumps({"month": month, "status": gate}))
    return month_dir


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_the_gate_rescores_a_baseline_scored_against_other_labels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "benchmarks"
    # The labels change in place between the months (one evaluation set file, re-annotated).
    evalset = write_evalset(tmp_path / "mini.jsonl", evalset_records())
    before = finished_month(root, "2026-09", evalset, "no baseline")
    relabelled(evalset)
    month = finished_month(root, "2026-10", evalset, None)
    old_hash, new_hash = (
        metrics_of(m / "mini" / "bm25", "manifest.json")["labels"]["hash"] for m in (before, month)
    )
    cfg = RunConfig()
    cfg.benchmark = BenchmarkConfig(enabled=True, root=str(root), gate=GateConfig())
    cfg.compare.n_resamples = 2000
    gate = gate_month(cfg, root, "2026-10", month_jobs(month))
    print_gate("2026-10", gate)  # as the monthly command shows it
    assert gate is not None and gate.passed
    line = (
        "mini/bm25: baseline re-scored against current labels: "
        f"{short(old_hash)} -> {short(new_hash)}"
    )
    record = json.loads((month / "gate.json").read_text())
    assert record["relabelled"] == [line]
    assert f"- {line}" in (month / "gate.md").read_text()
    assert line in capsys.readouterr().out
    # Like with like: the same retriever on the same labels changes nothing, and the label
    # file's change is no plan difference once the baseline is scored with it.
    assert record["plan_differences"] == []
    assert [(c["before"], c["change"]) for c in record["checks"]] == [
        (c["after"], 0.0) for c in record["checks"]
    ]
    # Scored as recorded, the baseline would differ from this month.
    recorded = metrics_of(before / "mini" / "bm25")["stages"]["final"]["overall"]["recall@6"]
    current = metrics_of(month / "mini" / "bm25")["stages"]["final"]["overall"]["recall@6"]
    assert recorded != current
    # The trend marks the month whose labels differ from the previous month's.
    write_trend(root, ["recall@K"])
    trend = json.loads((root / "trend.json").read_text())
    assert trend["label_changes"] == [
        {
            "dataset": "mini",
            "month": "2026-10",
            "previous_month": "2026-09",
            "from": [old_hash],
            "to": [new_hash],
        }
    ]
    markdown = (root / "trend.md").read_text()
    assert (
        f"- 2026-10*: labels differ from 2026-09's ({short(old_hash)} -> {short(new_hash)}): "
        "its change is partly the labels'." in markdown
    )
    assert "| type | retriever | 2026-09 | 2026-10* |" in markdown


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_a_baseline_whose_corpus_changed_is_compared_as_recorded_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "benchmarks"
    evalset = write_evalset(tmp_path / "mini.jsonl", evalset_records())
    corpus = shutil.copytree(FIXTURE / "corpus" / "mini", tmp_path / "corpus")
    overrides = [f"dataset.corpus={corpus}"]
    before = root / "2026-09"
    make_job(
        before / "mini" / "bm25",
        [*mini_overrides(root), "retriever=bm25", f"dataset.evalset={evalset}", *overrides],
    )
    (before / "benchmark.json").write_text(json.dumps({"status": "finished"}))
    (before / "gate.json").write_text(json.dumps({"status": "no baseline"}))
    relabelled(evalset)
    passages = corpus / "passages.jsonl"
    passages.write_text(passages.read_text(encoding="utf-8").replace("144元", "150元"))
    month = root / "2026-10"
    make_job(
        month / "mini" / "bm25",
        [*mini_overrides(root), "retriever=bm25", f"dataset.evalset={evalset}", *overrides],
    )
    (month / "benchmark.json").write_text(json.dumps({"status": "finished"}))
    cfg = RunConfig()
    cfg.benchmark = BenchmarkConfig(enabled=True, root=str(root), gate=GateConfig())
    cfg.compare.n_resamples = 2000
    # The changed files are plan differences the gate was not told to allow.
    gate = gate_month(cfg, root, "2026-10", month_jobs(month))
    print_gate("2026-10", gate)  # as the monthly command shows it
    assert gate is not None and not gate.passed
    record = json.loads((month / "gate.json").read_text())
    [line] = record["relabelled"]
    assert line.startswith("mini/bm25: labels changed (")
    assert "but the baseline could not be re-scored, compared as recorded: " in line
    assert "its corpus changed since the job ran" in line
    assert {d["key"] for d in record["plan_differences"]} == {
        "dataset.files.mini.jsonl",
        "dataset.files.passages.jsonl",
    }
    capsys.readouterr()


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_one_evalset_for_jobs_of_several_datasets_is_refused(
    tmp_path: Path, jobs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(jobs["bm25"], tmp_path / "month" / "mini" / "bm25")
    make_job(
        tmp_path / "month" / "other" / "bm25",
        [*mini_overrides(tmp_path), "retriever=bm25", "dataset.name=other"],
    )
    assert rescore_main([str(tmp_path / "month"), "--evalset", str(jobs["snapshot"])]) == 2
    assert capsys.readouterr().err == (
        f"error: config key '--evalset': {tmp_path / 'month'} holds jobs of 2 datasets "
        "(mini, other): re-score one dataset's folder at a time with --evalset\n"
    )
    assert not list((tmp_path / "month").rglob(RESCORED_METRICS))


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_a_beir_job_is_rescored_against_its_folders_current_qrels(tmp_path: Path) -> None:
    folder = tmp_path / "tiny-beir"
    (folder / "qrels").mkdir(parents=True)
    corpus = [{"_id": f"d{i}", "title": "", "text": f"kw{i:03d} 门票 价格"} for i in range(8)]
    queries = [{"_id": f"q{i}", "text": f"kw{i:03d} 门票"} for i in range(8)]
    write_evalset(folder / "corpus.jsonl", corpus)
    write_evalset(folder / "queries.jsonl", queries)
    qrels = folder / "qrels" / "test.tsv"
    # q7 is judged in no split: counted as unjudged, never run.
    qrels.write_text("query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{i}\t1\n" for i in range(7)))
    overrides = [
        "dataset=beir",
        f"dataset.path={folder}",
        "retriever=bm25",
        "top_k=3",
        f"cache_dir={tmp_path / 'cache'}",
    ]
    job = make_job(tmp_path / "job", overrides)
    assert as_json(rescore_job(job).metrics) == metrics_of(job)
    # New judgements for the same queries: q1's relevant passage moves, q2 gains a graded one.
    qrels.write_text(
        qrels.read_text().replace("q1\td1\t1", "q1\td3\t1").replace("q2\td2\t1", "q2\td2\t2")
        + "q2\td5\t1\n"
    )
    rescored = rescore_job(job)
    fresh = metrics_of(make_job(tmp_path / "fresh", overrides))
    assert rescored.labels_changed
    assert as_json(rescored.metrics) == fresh != metrics_of(job)
    with pytest.raises(
        ConfigError, match="ran on a BEIR folder: its labels are the folder's qrels"
    ):
        rescore_job(job, evalset=EVALSET)
