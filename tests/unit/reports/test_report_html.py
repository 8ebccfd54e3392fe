"""report.html and comparison.html: what they embed is what the job recorded (fast tests read
the embedded JSON back), and the explorer works in a real browser (headless Chromium over the
DevTools protocol: marked slow; skipped with its reason only where Chromium is not installed,
a failure under CI)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import websocket  # noqa: F401  (the browser test's client: a declared test dependency)
from conftest import ROOT, run_in_process
from support.chromium import embedded, embedded_text, explore

from retrieval_bench.compare.build import compare_dirs
from retrieval_bench.config.compare import CompareConfig
from retrieval_bench.data.passages import load_passages
from retrieval_bench.data.trec import read_qrels
from retrieval_bench.job.result import JobResult
from retrieval_bench.jobdir.files import to_dataframe
from retrieval_bench.jobdir.names import UNFINISHED as UNFINISHED_MARKER
from retrieval_bench.records import (
    EvalQuery,
    FilterDecision,
    ParsedQuery,
    QueryRecord,
    StageRecord,
    passage_text,
)
from retrieval_bench.reports.explorer_data import (
    TRUNCATION_MARK,
    SystemRun,
    explorer_payload,
    passage_table,
)
from retrieval_bench.reports.html import render_html
from retrieval_bench.scoring.table import COLUMNS


def rankings(job_dir: Path) -> list[dict[str, Any]]:
    lines = (job_dir / "rankings.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def query_record(
    query: str, stages: dict[str, tuple[list[str], list[float]]], query_type: str = "t"
) -> QueryRecord:
    """A query `q1`'s record with these stages (ids, scores), as a pipeline records it."""
    return QueryRecord(
        query=EvalQuery("q1", query, query_type, "reviewed"),
        route=None,
        strategy="rrf",
        parsed=ParsedQuery(),
        filter=FilterDecision(None),
        stages={
            n: StageRecord(ids, scores, len(ids), len(ids)) for n, (ids, scores) in stages.items()
        },
    )


@pytest.fixture
def mini_job(mini_job: tuple[JobResult, Path]) -> Path:
    """The session's mini job (hybrid, top_k 6): here, its folder."""
    return mini_job[1]


def test_report_html_embeds_the_recorded_rankings_labels_and_metrics(mini_job: Path) -> None:
    data = embedded(mini_job / "report.html")
    records = rankings(mini_job)
    metrics = json.loads((mini_job / "metrics.json").read_text(encoding="utf-8"))
    qrels = read_qrels(mini_job / "qrels.trec")
    [system] = data["systems"]
    pids = data["passages"]["ids"]
    assert data["queries"]["ids"] == [r["query_id"] for r in records]
    assert system["stages"] == list(records[0]["stages"]) == list(metrics["stages"])
    for qi, record in enumerate(records):
        for stage, recorded in record["stages"].items():
            assert [pids[i] for i in system["rankings"][stage][qi]] == recorded["ids"]
        labels = {pids[i]: grade for i, grade in data["queries"]["labels"][qi]}
        assert labels == qrels.get(record["query_id"], {})
        row = metrics["stages"]["final"]["per_query"].get(record["query_id"])
        shown = system["values"]["final"]["recall@6"][qi]
        assert shown == (None if row is None else float(f"{row['recall@6']:.4g}"))
    # Where labelled passages were lost: metrics.json's stage_loss, per query over the ids.
    loss = metrics["stage_loss"]
    assert {k: system["loss"][k] for k in ("checkpoints", "overall", "by_type")} == {
        k: loss[k] for k in ("checkpoints", "overall", "by_type")
    }
    shown_lost = {
        qid: {pids[i]: stage for i, stage in lost}
        for qid, lost in zip(data["queries"]["ids"], system["loss"]["per_query"], strict=True)
        if lost is not None
    }
    assert set(shown_lost) == set(qrels)  # every scored query, and only those
    assert shown_lost == {
        qid: {pid: stage for stage, ids in loss["per_query"].get(qid, {}).items() for pid in ids}
        for qid in qrels
    }
    assert data["meta"]["left_out"] == []
    assert data["meta"]["text_note"] == ""  # 12 short passages: nothing cut


def test_stage_names_come_from_the_records() -> None:
    """A pipeline with stages this package never names (rerank, context) shows them in the
    order rankings.jsonl recorded them."""
    stages = ("sparse", "fused", "rerank", "final", "context")
    record = query_record("<script>x</script>", {s: (["p2", "p1"], [2.0, 1.0]) for s in stages})
    metrics = {
        "stages": {s: {"overall": {"n": 1}, "per_query": {}} for s in stages},
        "baselines": {"bm25": {"overall": {"n": 1, "recall@2": 0.5}}},
    }
    system = SystemRun("x", "/x", 2, metrics, [record])
    payload = explorer_payload("t", "job", [system], {"q1": {"p1": 1}}, lambda pid: None)
    assert payload["systems"][0]["stages"] == list(stages)
    # No stage_loss in this metrics.json (a folder from before it): computed by the same
    # function from the rankings; p1 is in every stage, so kept.
    loss = payload["systems"][0]["loss"]
    assert (loss["checkpoints"], loss["per_query"]) == (["pool", *stages[1:]], [[]])
    assert loss["overall"]["lost_at"] == {"pool": 0, **dict.fromkeys(stages[1:], 0), "kept": 1}
    aggregates = payload["systems"][0]["aggregates"]
    assert list(aggregates) == [*stages, "baselines/bm25"]  # a router's baselines beside them
    assert aggregates["baselines/bm25"]["overall"] == {"recall@2": 0.5, "n": 1}
    page = render_html(payload)
    assert "<script>x</script>" not in page  # a query's text cannot close the data element
    assert payload["passages"]["text"] == [None, None]
    assert "not at hand" in payload["meta"]["text_note"]


def test_the_page_names_the_lower_is_better_metrics_it_shows() -> None:
    """The page colours a low leak_any as good: `lower_is_better` names exactly the shown
    metrics (the systems' and the comparison's, without `@K`) that are better when smaller."""
    record = query_record("q", {"final": (["p1"], [1.0])})
    system = SystemRun("x", "/x", 1, {"stages": {}}, [record])
    specs = ["recall@K", "leak_any@K", "negative_any@5", "source_coverage", "judge_faithfulness"]
    comparison = {"metrics": [{"spec": spec} for spec in specs]}
    payload = explorer_payload("t", "sweep", [system], {}, lambda pid: None, comparison)
    assert embedded_text(render_html(payload))["lower_is_better"] == ["leak_any", "negative_any"]


def test_passage_texts_are_cut_to_the_budget_and_said_so() -> None:
    """10,000 passages of 5,000 characters each: every text is cut to the same cap, the
    total stays within the budget, each cut text ends with the marker and keeps its length."""
    ids = [f"p{i}" for i in range(10_000)]
    texts = {pid: "文" * 5_000 for pid in ids}
    table, note = passage_table(ids, texts.get, budget=300_000, max_chars=2_000)
    sizes = [len(t.encode("utf-8")) for t in table["text"]]
    assert sum(sizes) <= 300_000  # (300,000 - 10,000 marks of 3 bytes) / 3 bytes a character
    assert {len(t) for t in table["text"]} == {9 + len(TRUNCATION_MARK)}
    assert all(t.endswith(TRUNCATION_MARK) for t in table["text"])
    assert set(table["full_chars"]) == {5_000}
    assert note.startswith(
        "Passage texts cut (marked …) so this file stays within 0.3 MB of text: "
        "10000 of 10000 other passages to their first 9 characters."
    )


def test_labelled_and_top_k_passages_get_the_budget_first() -> None:
    ids = [f"p{i}" for i in range(100)]
    texts = {pid: "a" * 1_000 for pid in ids}
    table, note = passage_table(ids, texts.get, budget=20_000, max_chars=2_000, first=ids[:10])
    assert [len(t) for t in table["text"][:10]] == [1_000] * 10  # 10,000 of the budget
    # 20,000 - 100 marks of 3 bytes - 10,000 for the first ten = 9,700 over 90 texts
    assert {len(t) for t in table["text"][10:]} == {107 + len(TRUNCATION_MARK)}
    assert note == (
        "Passage texts cut (marked …) so this file stays within 0.02 MB of text: "
        "90 of 90 other passages to their first 107 characters. The full texts are in the corpus."
    )


def test_sweep_html_names_the_jobs_left_out(mini_job: Path, tmp_path: Path) -> None:
    import pandas as pd  # here, not at collection: ~0.2 s of every xdist worker

    sweep = tmp_path / "sweep"
    for name in ("0-a", "1-b"):
        shutil.copytree(mini_job, sweep / name)
    (sweep / "2-c").mkdir()
    (sweep / "2-c" / UNFINISHED_MARKER).write_text("running (2026-11-30T23:00:00, pid 1)\n")
    compare_dirs([sweep], CompareConfig(n_resamples=200), out_dir=sweep)
    data = embedded(sweep / "comparison.html")
    assert [s["label"] for s in data["systems"]] == ["0-a", "1-b"]
    assert data["meta"]["left_out"] == [
        {
            "path": str(sweep / "2-c"),
            "reason": "unfinished: running (2026-11-30T23:00:00, pid 1)",
        }
    ]
    assert data["comparison"]["stage"] == "final"
    # The sweep's long table: every job's rows under its label.
    table = pd.read_csv(sweep / "results.csv", keep_default_na=False)
    one = to_dataframe(mini_job)
    assert sorted(set(table["system"])) == ["0-a", "1-b"]
    assert len(table) == 2 * len(one)


def test_to_dataframe_equals_results_csv(mini_job: Path) -> None:
    import pandas as pd  # as above

    frame = to_dataframe(mini_job)
    csv = pd.read_csv(mini_job / "results.csv", dtype=str, keep_default_na=False)
    assert list(frame.columns) == list(COLUMNS)
    assert str(frame["value"].dtype) == "float64"
    assert frame["system"].unique().tolist() == ["hybrid"]
    assert frame.drop(columns="value").values.tolist() == csv.drop(columns="value").values.tolist()
    values = [float(v) if v else float("nan") for v in csv["value"]]
    assert frame["value"].tolist() == pytest.approx(values, nan_ok=True)
    metrics = json.loads((mini_job / "metrics.json").read_text(encoding="utf-8"))
    from_dict = to_dataframe(metrics, system="hybrid")
    assert from_dict.equals(frame)


@pytest.mark.slow
def test_explorer_in_chromium(chromium_or_skip: None, tmp_path: Path, shared_cache: Path) -> None:
    """The travel job's report.html in headless Chromium: no console error; filtering a type
    lists exactly that type's queries; the opened query shows each stage's ranking as
    rankings.jsonl recorded it, the labelled passages marked, metrics.json's values; a click
    shows the passage text. The screenshot stays in the test's temp folder."""
    job = run_in_process(["retriever=bm25", f"cache_dir={shared_cache}"], tmp_path)[1]
    shot = tmp_path / "explorer.png"
    shown = explore(job / "report.html", "negation", shot)
    assert shown["errors"] == []
    records = rankings(job)
    negation = [r["query_id"] for r in records if r["query_type"] == "negation"]
    assert shown["listed"] == negation
    assert shown["count"] == f"{len(negation)} of {len(records)} queries"
    metrics = json.loads((job / "metrics.json").read_text(encoding="utf-8"))
    per_query = metrics["stages"]["final"]["per_query"]
    for qid, cells in zip(shown["listed"], shown["cells"], strict=True):
        assert cells[3] == f"{per_query[qid]['recall@6']:.3f}"
    opened = negation[0]
    assert shown["opened"] == opened
    record = next(r for r in records if r["query_id"] == opened)
    relevant = {p for p, g in read_qrels(job / "qrels.trec")[opened].items() if g > 0}
    [(side_name, side)] = shown["detail"].items()
    assert list(side["stages"]) == list(record["stages"])
    for stage, recorded in record["stages"].items():
        assert side["stages"][stage]["ids"] == recorded["ids"]
        assert set(side["stages"][stage]["relevant"]) == relevant & set(recorded["ids"])
        value = metrics["stages"][stage]["per_query"][opened]["recall@6"]
        assert f"recall@6 {value:.3f}" in side["stages"][stage]["line"]

    # Where each labelled passage was lost: exactly metrics.json's stage_loss, per passage of
    # the opened query and in the overall table.
    loss = metrics["stage_loss"]
    lost = {pid: stage for stage, ids in loss["per_query"].get(opened, {}).items() for pid in ids}
    assert side["lost_at"] == {pid: lost.get(pid, "kept") for pid in relevant}
    assert shown["loss_tables"] == {side_name: loss["overall"]["lost_at"]}
    # bm25 alone is the candidate pool, final the cut after it.
    assert loss["checkpoints"] == ["pool", "final"]
    clicked = next(
        pid for recorded in record["stages"].values() for pid in recorded["ids"] if pid in relevant
    )
    corpus = {p.id: p for p in load_passages(ROOT / "corpus" / "travel" / "passages.jsonl")}
    assert shown["text"] == [passage_text(corpus[clicked])]
    assert shot.stat().st_size > 10_000


def test_deep_rankings_are_cut_and_labelled_passages_below_keep_their_rank() -> None:
    ids = [f"p{i}" for i in range(1, 1001)]
    record = query_record("q", {"bm25": (ids, [float(-i) for i in range(1000)])})
    metrics = {"stages": {"bm25": {"overall": {"n": 1}, "per_query": {}}}}
    system = SystemRun("x", "/x", 10, metrics, [record])
    payload = explorer_payload(
        "t", "job", [system], {"q1": {"p500": 1, "p3": 1}}, lambda pid: None, max_depth=100
    )
    [out] = payload["systems"]
    pids = payload["passages"]["ids"]
    assert [pids[i] for i in out["rankings"]["bm25"][0]] == ids[:100]
    assert out["returned"]["bm25"] == [1000]
    assert [[rank, pids[i], score] for rank, i, score in out["deep"]["bm25"][0]] == [
        [500, "p500", -499.0]
    ]
    assert payload["meta"]["depth_note"].startswith(
        "Rankings of stage(s) bm25 are shown to depth 100"
    )


@pytest.mark.slow
def test_comparison_html_in_chromium(
    chromium_or_skip: None, mini_job: Path, tmp_path: Path
) -> None:
    """A sweep's page: two jobs side by side for the opened query, no console error, and the
    unfinished job named at the top."""
    sweep = tmp_path / "sweep"
    for name in ("0-a", "1-b"):
        shutil.copytree(mini_job, sweep / name)
    (sweep / "2-c").mkdir()
    (sweep / "2-c" / UNFINISHED_MARKER).write_text("interrupted\n")
    compare_dirs([sweep], CompareConfig(n_resamples=200), out_dir=sweep)
    records = rankings(mini_job)
    qtype = records[0]["query_type"]
    shown = explore(sweep / "comparison.html", qtype, tmp_path / "comparison.png")
    assert shown["errors"] == []
    assert shown["listed"] == [r["query_id"] for r in records if r["query_type"] == qtype]
    assert list(shown["detail"]) == ["0-a", "1-b"]
    for side in shown["detail"].values():
        assert side["stages"]["final"]["ids"] == records[0]["stages"]["final"]["ids"]
    assert shown["left_out"] == [f"Left out: {sweep / '2-c'} (unfinished: interrupted)"]


def test_the_others_keep_a_quarter_of_the_text_budget() -> None:
    ids = [f"p{i}" for i in range(100)]
    texts = {pid: "a" * (10_000 if i < 10 else 1_000) for i, pid in enumerate(ids)}
    table, _ = passage_table(ids, texts.get, budget=20_000, max_chars=20_000, first=ids[:10])
    # 19,700 after the marks: the first ten take 3/4 (1,477 each), the others the rest (54 each)
    assert {len(t) for t in table["text"][:10]} == {1_477 + len(TRUNCATION_MARK)}
    assert {len(t) for t in table["text"][10:]} == {54 + len(TRUNCATION_MARK)}
