"""Judgment pools: pool -> annotate -> import -> a new label snapshot -> rerun, and the refusals.

Jobs run in-process on the mini fixture (bm25 and hybrid, composed by Hydra as the app would),
written to their folders with the app's writer; the evaluation set is a copy in tmp, so the
snapshots an import writes beside it never touch the repository.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURE, run_mini
from conftest import MINI_CORPUS as CORPUS
from conftest import POOL_DEPTH as DEPTH
from support.datasets import read_jsonl

from retrieval_bench.jobdir.job_sets import assign_labels
from retrieval_bench.jobdir.read import load_jobs
from run.compare import main as compare_main
from run.pool import main as pool_main
from run.rescore import main as rescore_main


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), "utf-8")
    return path


def final_metrics(job: Path) -> dict[str, Any]:
    return json.loads((job / "metrics.json").read_text())["stages"]["final"]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory, shared_cache: Path):
    """A sweep folder (bm25, hybrid, the rules router) and the evaluation set copy it was
    labelled with."""
    tmp = tmp_path_factory.mktemp("pool")
    evalset = tmp / "evalsets" / "mini.jsonl"
    evalset.parent.mkdir()
    shutil.copy(FIXTURE / "evalsets" / "mini.jsonl", evalset)
    folder = tmp / "sweep"
    for i, retriever in enumerate(("bm25", "hybrid")):
        run_mini(folder / f"{i}-{retriever}", retriever, evalset, shared_cache)
    run_mini(folder / "2-router", "hybrid", evalset, shared_cache, "router=rules")
    return folder, evalset


def test_pool_holds_every_unlabelled_passage_of_every_top_k_once(sweep, tmp_path: Path) -> None:
    folder, evalset = sweep
    assert pool_main([str(folder), "--depth", "3", "--out", str(tmp_path)]) == 0
    pool = read_jsonl(tmp_path / "pool.jsonl")
    labels = {r["query_id"]: r for r in read_jsonl(evalset)}
    # What the pool must hold, from the rankings themselves: every stage and baseline.
    jobs = load_jobs([folder])
    assign_labels(jobs)
    expected: dict[tuple[str, str], dict[str, int]] = {}
    for job in jobs:
        for record in read_jsonl(job.path / "rankings.jsonl"):
            qid = record["query_id"]
            stages = {
                **record["stages"],
                **{f"baselines.{b}": r for b, r in record["baselines"].items()},
            }
            for stage, ranked in stages.items():
                for rank, pid in enumerate(ranked["ids"][:3], start=1):
                    if pid not in labels[qid]["relevant_ids"]:
                        expected.setdefault((qid, pid), {})[f"{job.label}:{stage}"] = rank
    assert any(":baselines." in s for sources in expected.values() for s in sources)
    assert {(r["query_id"], r["id"]): r["retrieved_by"] for r in pool} == expected
    assert len(pool) == len(expected)  # once each
    for r in pool:
        assert r["grade"] is None and r["best_rank"] == min(r["retrieved_by"].values())
        assert r["label_status"] == labels[r["query_id"]]["label_status"]
    # Unreviewed and no_answer queries are pooled too, marked by their status.
    assert {r["label_status"] for r in pool} == {"reviewed", "unreviewed", "no_answer"}
    # The CSV holds the same rows.
    csv_lines = (tmp_path / "pool.csv").read_text(encoding="utf-8").splitlines()
    assert csv_lines[0].startswith("query_id,query,query_type,label_status,id,")
    assert len(csv_lines) == len(pool) + 1


def test_round_trip_pool_annotate_import_rerun(sweep, tmp_path: Path, shared_cache: Path) -> None:
    folder, evalset = sweep
    original = evalset.read_bytes()
    assert pool_main([str(folder), "--depth", str(DEPTH), "--out", str(tmp_path)]) == 0
    pool = read_jsonl(tmp_path / "pool.jsonl")
    # The annotator: each query's best-ranked pooled passage is relevant, the rest are not.
    first: dict[str, str] = {}
    for r in pool:
        r["grade"] = 0 if first.setdefault(r["query_id"], r["id"]) != r["id"] else 1
    filled = write_jsonl(tmp_path / "filled.jsonl", pool)
    assert (
        pool_main(["--import", str(filled), "--evalset", str(evalset), "--corpus", str(CORPUS)])
        == 0
    )

    # A new snapshot beside the old set, which is kept byte for byte.
    assert evalset.read_bytes() == original
    snapshots = sorted(evalset.parent.glob("mini.*.jsonl"))
    assert len(snapshots) == 1
    snapshot = snapshots[0]
    relabelled = {r["query_id"]: r for r in read_jsonl(snapshot)}
    for qid, pid in first.items():
        assert pid in relabelled[qid]["relevant_ids"]

    # Rerun the bm25 job against the snapshot: every passage of every final list is judged.
    old = final_metrics(folder / "0-bm25")
    rerun = run_mini(tmp_path / "rerun", "bm25", snapshot, shared_cache)
    new = final_metrics(rerun)
    assert new["overall"][f"judged@{DEPTH}"] > old["overall"][f"judged@{DEPTH}"]
    final_lists = {
        r["query_id"]: r["stages"]["final"]["ids"] for r in read_jsonl(rerun / "rankings.jsonl")
    }
    for qid, row in new["per_query"].items():
        assert row[f"judged@{DEPTH}"] == len(final_lists[qid][:DEPTH]) / DEPTH
        # One relevant passage more where the pool had one; hits follow the final list.
        before = old["per_query"][qid]
        added = 1 if qid in first else 0
        assert row["n_relevant"] == before["n_relevant"] + added
        found = 1 if added and first[qid] in final_lists[qid][:DEPTH] else 0
        assert row[f"hits@{DEPTH}"] == before[f"hits@{DEPTH}"] + found
    # The status of a query is the annotators' to keep: an unreviewed query stays excluded.
    assert new["excluded_queries"]["m08"] == "unreviewed"
    assert "m08" in first and first["m08"] in relabelled["m08"]["relevant_ids"]
    # Fully judged, the condensed list is the plain list: the two metrics agree.
    for qid, row in new["per_query"].items():
        assert row[f"ndcg_condensed@{DEPTH}"] == row[f"ndcg@{DEPTH}"], qid

    # Importing the same file again finds its labels there already: nothing new, no new file.
    assert (
        pool_main(["--import", str(filled), "--evalset", str(snapshot), "--corpus", str(CORPUS)])
        == 0
    )
    assert sorted(evalset.parent.glob("mini.*.jsonl")) == [snapshot]
    # And the pool of the rerun against the snapshot is empty at that depth.
    out = tmp_path / "again"
    assert pool_main([str(rerun), "--depth", str(DEPTH), "--out", str(out)]) == 0
    assert (out / "pool.jsonl").read_text() == ""


def test_round_trip_with_rescore_equals_a_rerun(sweep, tmp_path: Path, shared_cache: Path) -> None:
    """pool -> annotate -> import -> `run.rescore --evalset <snapshot>`: the stored rankings
    re-scored against the new labels give what a job rerun on the snapshot measures."""
    folder, evalset = sweep
    jobs = tmp_path / "sweep"
    shutil.copytree(folder, jobs)
    base = Path(shutil.copy(evalset, tmp_path / "mini.jsonl"))
    assert pool_main([str(jobs), "--depth", str(DEPTH), "--out", str(tmp_path)]) == 0
    pool = read_jsonl(tmp_path / "pool.jsonl")
    for i, r in enumerate(pool):
        r["grade"] = 1 if i % 3 == 0 else 0
    filled = write_jsonl(tmp_path / "filled.jsonl", pool)
    assert (
        pool_main(["--import", str(filled), "--evalset", str(base), "--corpus", str(CORPUS)]) == 0
    )
    snapshot = next(tmp_path.glob("mini.*.jsonl"))
    assert rescore_main([str(jobs / "0-bm25"), "--evalset", str(snapshot)]) == 0
    rescored = json.loads((jobs / "0-bm25" / "metrics.rescored.json").read_text())
    rerun = final_metrics(run_mini(tmp_path / "rerun", "bm25", snapshot, shared_cache))
    old = final_metrics(jobs / "0-bm25")
    assert rescored["stages"]["final"]["per_query"] == rerun["per_query"]
    assert rerun["overall"][f"judged@{DEPTH}"] > old["overall"][f"judged@{DEPTH}"]


def test_csv_import_writes_the_same_snapshot_as_jsonl(sweep, tmp_path: Path) -> None:
    folder, evalset = sweep
    work = tmp_path / "evalsets"
    work.mkdir()
    base = shutil.copy(evalset, work / "mini.jsonl")
    assert pool_main([str(folder), "--depth", "2", "--out", str(tmp_path)]) == 0
    pool = read_jsonl(tmp_path / "pool.jsonl")
    for i, r in enumerate(pool):
        r["grade"] = i % 2
    jsonl = write_jsonl(tmp_path / "filled.jsonl", pool)
    lines = (tmp_path / "pool.csv").read_text(encoding="utf-8").splitlines()
    csv_filled = tmp_path / "filled.csv"
    csv_filled.write_text(
        "\n".join([lines[0], *(f"{line}{i % 2}" for i, line in enumerate(lines[1:]))]) + "\n",
        encoding="utf-8",
    )
    out_jsonl, out_csv = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    common = ["--evalset", str(base), "--corpus", str(CORPUS)]
    assert pool_main(["--import", str(jsonl), *common, "--out", str(out_jsonl)]) == 0
    assert pool_main(["--import", str(csv_filled), *common, "--out", str(out_csv)]) == 0
    assert out_jsonl.read_bytes() == out_csv.read_bytes()


# --- Bad input: refused with file:line, exit 2, nothing written ------------------------------


def _base(tmp_path: Path) -> Path:
    folder = tmp_path / "evalsets"
    folder.mkdir()
    return Path(shutil.copy(FIXTURE / "evalsets" / "mini.jsonl", folder / "mini.jsonl"))


GOOD = {"query_id": "m01", "id": "sy-wzz-dive", "grade": 1}


@pytest.mark.parametrize(
    ("records", "grades", "line", "message"),
    [
        ([GOOD, {**GOOD, "query_id": "m99"}], "0,1", 2, "unknown query_id 'm99'"),
        ([GOOD, {**GOOD, "id": "nope"}], "0,1", 2, "unknown passage id 'nope'"),
        ([{**GOOD, "grade": 2}], "0,1", 1, "grade 2 is outside the scale 0, 1"),
        ([{**GOOD, "grade": 3}], "0,1,2", 1, "grade 3 is outside the scale 0, 1, 2"),
        ([{**GOOD, "grade": True}], "0,1", 1, "grade True is not an integer"),
        ([GOOD, {**GOOD, "grade": 0}], "0,1", 2, "grade 0 disagrees with grade 1 on line 1"),
        # Two relevant grades disagree too: which one is the label?
        ([GOOD, {**GOOD, "grade": 2}], "0,1,2", 2, "grade 2 disagrees with grade 1 on line 1"),
        (
            [GOOD, {**GOOD, "id": "hk-hsy-park", "query": "an edited question"}],
            "0,1",
            2,
            "query 'm01': the annotator was shown 'an edited question', but the evaluation set "
            "asks",
        ),
        ([{**GOOD, "grdae": 1}], "0,1", 1, "unknown field 'grdae'"),
        ([{"query_id": "m01", "id": "sy-wzz-dive"}], "0,1", 1, "missing field 'grade'"),
        (
            [{"query_id": "m01", "id": "sy-wzz-tickets", "grade": 0}],
            "0,1",
            1,
            "already labels it 1; an import adds labels, it does not change them",
        ),
    ],
)
def test_bad_annotations_are_refused_naming_file_and_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    records: list[dict[str, Any]],
    grades: str,
    line: int,
    message: str,
) -> None:
    base = _base(tmp_path)
    filled = write_jsonl(tmp_path / "filled.jsonl", records)
    argv = ["--import", str(filled), "--evalset", str(base), "--corpus", str(CORPUS)]
    assert pool_main([*argv, "--grades", grades]) == 2
    err = capsys.readouterr().err
    assert f"{filled}:{line}: " in err and message in err, err
    assert sorted(base.parent.iterdir()) == [base]  # nothing written


def test_agreeing_duplicates_and_blank_grades_are_fine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = _base(tmp_path)
    records = [
        GOOD,
        {**GOOD, "grade": None},
        GOOD,
        {"query_id": "m02", "id": "hk-hsy-park", "grade": 0},
    ]
    filled = write_jsonl(tmp_path / "filled.jsonl", records)
    assert (
        pool_main(["--import", str(filled), "--evalset", str(base), "--corpus", str(CORPUS)]) == 0
    )
    assert "1 relevant and 1 non-relevant judgements added" in capsys.readouterr().out
    snapshot = next(p for p in base.parent.iterdir() if p != base)
    rows = {r["query_id"]: r for r in read_jsonl(snapshot)}
    assert rows["m01"]["relevant_ids"] == ["sy-wzz-tickets", "sy-wzz-dive"]
    assert rows["m02"]["relevance"] == {"hk-hsy-park": 0}
    # Untouched records keep their bytes.
    old_lines = base.read_text(encoding="utf-8").splitlines()
    new_lines = snapshot.read_text(encoding="utf-8").splitlines()
    assert old_lines[2:] == new_lines[2:]


def test_a_snapshot_is_never_overwritten(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = _base(tmp_path)
    taken = tmp_path / "taken.jsonl"
    taken.write_text("someone's file\n")
    filled = write_jsonl(tmp_path / "filled.jsonl", [GOOD])
    argv = ["--import", str(filled), "--evalset", str(base), "--corpus", str(CORPUS)]
    assert pool_main([*argv, "--out", str(taken)]) == 2
    assert "never overwritten" in capsys.readouterr().err
    assert taken.read_text() == "someone's file\n"


def test_pool_refuses_a_changed_corpus_and_an_annotators_file(
    sweep, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder, _ = sweep
    job = tmp_path / "job"
    shutil.copytree(folder / "0-bm25", job)
    # An annotator's pool is never replaced by another one.
    (job / "pool.jsonl").write_text('{"grade": 1}\n')
    assert pool_main([str(job), "--depth", "2"]) == 2
    assert "exists with other content" in capsys.readouterr().err
    assert (job / "pool.jsonl").read_text() == '{"grade": 1}\n'
    # A job whose corpus changed since it ran would pool other texts under its ids.
    manifest = json.loads((job / "manifest.json").read_text())
    manifest["dataset"]["files_sha256"]["passages.jsonl"] = "0" * 64
    (job / "manifest.json").write_text(json.dumps(manifest))
    assert pool_main([str(job), "--depth", "2", "--out", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err
    assert f"job {job}: its corpus changed" in err and "0" * 64 in err
    assert not (tmp_path / "p").exists()


def test_comparison_shows_judged_and_condensed_metrics_per_configuration(
    sweep, tmp_path: Path
) -> None:
    folder, _ = sweep
    assert compare_main([str(folder), "--out", str(tmp_path), "--resamples", "200"]) == 0
    record = json.loads((tmp_path / "comparison.json").read_text())["datasets"]["mini"]
    coverage = record["coverage"]
    assert coverage["specs"][:3] == ["judged@K", "recall@K", "recall_condensed@K"]
    jobs = load_jobs([folder])
    assign_labels(jobs)
    assert len(coverage["values"]) == len(jobs) == 3
    for job in jobs:
        overall = final_metrics(job.path)["overall"]
        values = coverage["values"][job.label]
        assert values["judged@K"] == overall[f"judged@{DEPTH}"]
        assert values["ndcg_condensed@K"] == overall[f"ndcg_condensed@{DEPTH}"]
    md = (tmp_path / "comparison.md").read_text()
    assert "## Label coverage" in md and "| judged@K |" in md
    report = (folder / "0-bm25" / "report.md").read_text()
    assert f"| stage | n | judged@{DEPTH} | recall@{DEPTH} | recall_condensed@{DEPTH} |" in report


def test_a_person_s_relevant_label_replaces_a_judge_s_only_zero(tmp_path: Path) -> None:
    """The judge's grade-0 label was the query's only graded entry: once a person calls the
    pair relevant, the snapshot holds it in relevant_ids alone (no stale grade 0 left)."""
    from retrieval_bench.data.evalset import load_evalset
    from retrieval_bench.data.judgments import import_judgements

    judge = {"grade": 0, "label": True, "judge": "openai", "model": "m", "prompt_sha256": "ab"}
    evalset = write_jsonl(
        tmp_path / "set.jsonl",
        [
            {"query_id": "q1", "query": "问", "query_type": "t", "label_status": "reviewed",
             "relevant_ids": ["p1"], "relevance": {"p2": 0}, "judge": {"p2": judge}},
        ],
    )  # fmt: skip
    filled = write_jsonl(
        tmp_path / "filled.jsonl", [{"query_id": "q1", "query": "问", "id": "p2", "grade": 1}]
    )
    result = import_judgements(filled, evalset, {"p1", "p2"}, out=tmp_path / "after.jsonl")
    assert result.replaced_judge == 1
    (query,) = load_evalset(tmp_path / "after.jsonl")
    assert query.relevance == {"p1": 1, "p2": 1}
    assert query.people_relevance == {"p1": 1, "p2": 1}
    assert not query.judge["p2"].is_label
