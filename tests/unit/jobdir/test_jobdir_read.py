"""The job folder's typed readers (`retrieval_bench.jobdir.files`): rankings.jsonl reads back
as the records the job wrote, through one parser, and a malformed or truncated file fails with
exit 2 naming `<file>:<line>` for every command that reads it (issue #20 item 2: `run.compare`
over a truncated rankings.jsonl and `run.rescore` over a truncated metrics.json exited 3)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import mini_overrides, run_in_process

from retrieval_bench.errors import DataError
from retrieval_bench.job.result import JobResult
from retrieval_bench.jobdir import names
from retrieval_bench.jobdir.files import read_metrics, read_rankings, to_dataframe
from retrieval_bench.records import StageRecord
from run.compare import main as compare_main
from run.rescore import main as rescore_main


@pytest.fixture(scope="module")
def routed(
    tmp_path_factory: pytest.TempPathFactory, shared_cache: Path
) -> tuple[JobResult, Path]:
    """A routed BM25 job on the fixture (its records hold stages and router baselines)."""
    tmp = tmp_path_factory.mktemp("jobdir_read")
    overrides = [
        *mini_overrides(tmp),
        f"cache_dir={shared_cache}",
        "retriever=bm25",
        "router=rules",
        "scoring.cutoffs=[3]",
    ]
    return run_in_process(overrides, tmp)


def copied(job: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(job, tmp_path / "job"))


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def write_lines(path: Path, records: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))


def _stage(stage: StageRecord) -> tuple[Any, ...]:
    return stage.ids, stage.scores, stage.pool_requested, stage.pool_returned, stage.empty_reason


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_rankings_read_back_as_the_records_the_job_wrote(routed: tuple[JobResult, Path]) -> None:
    result, job = routed
    read = read_rankings(job)
    assert [r.query.query_id for r in read] == [r.query.query_id for r in result.records]
    assert any(r.baselines for r in read)
    for back, wrote in zip(read, result.records, strict=True):
        query = wrote.query
        assert (back.query.query, back.query.query_type, back.query.label_status) == (
            query.query,
            query.query_type,
            query.label_status,
        )
        assert back.query.relevance == {}  # the light record: the line holds no labels
        assert (back.route, back.rule, back.strategy, back.parsed) == (
            wrote.route,
            wrote.rule,
            wrote.strategy,
            wrote.parsed,
        )
        assert back.filter.applied == wrote.filter.applied
        for group in ("stages", "baselines"):
            backs, wrotes = getattr(back, group), getattr(wrote, group)
            assert list(backs) == list(wrotes)
            assert [_stage(s) for s in backs.values()] == [_stage(s) for s in wrotes.values()]
            assert all(s.indices is None for s in backs.values())


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_with_the_corpus_order_each_stage_gets_its_passage_indices(
    routed: tuple[JobResult, Path],
) -> None:
    result, job = routed
    positions = {p.id: i for i, p in enumerate(result.dataset.passages)}
    for back, wrote in zip(read_rankings(job, positions), result.records, strict=True):
        for name, stage in wrote.stages.items():
            assert stage.indices is not None
            assert np.array_equal(back.stages[name].indices, stage.indices)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda r: r["stages"]["final"].update(ids="p1"), "stages.final: 'ids' must be a list"),
        (lambda r: r["stages"]["final"].update(scores=[]), "stages.final: "),
        (lambda r: r["stages"]["final"].pop("pool_returned"), "stages.final: missing"),
        (lambda r: r.pop("strategy"), "no 'strategy'"),
        (lambda r: r.update(query_id=7), "'query_id' must be a string"),
        (lambda r: r.update(features=[1.0]), "'features' must be an object"),
        (lambda r: r.update(features={"bm25.top": "x"}), "features.bm25.top: must be a number"),
    ],
)
@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_a_malformed_rankings_line_names_its_file_and_line(
    routed: tuple[JobResult, Path], tmp_path: Path, edit: Any, message: str
) -> None:
    job = copied(routed[1], tmp_path)
    records = lines(job / names.RANKINGS)
    edit(records[1])
    write_lines(job / names.RANKINGS, records)
    with pytest.raises(DataError) as info:
        read_rankings(job)
    assert str(info.value).startswith(
        f"{job / names.RANKINGS}:2: not a rankings line of this version: "
    )
    assert message in str(info.value)


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_a_query_recorded_twice_and_an_unknown_passage_are_refused(
    routed: tuple[JobResult, Path], tmp_path: Path
) -> None:
    result, job = routed
    job = copied(job, tmp_path)
    records = lines(job / names.RANKINGS)
    write_lines(job / names.RANKINGS, [*records, records[0]])
    with pytest.raises(DataError, match=rf":{len(records) + 1}: query '\w+' recorded twice"):
        read_rankings(job)
    records[2]["stages"]["final"]["ids"][0] = "no-such-passage"
    write_lines(job / names.RANKINGS, records)
    read_rankings(job)  # without the corpus at hand, ids are not checked
    positions = {p.id: i for i, p in enumerate(result.dataset.passages)}
    with pytest.raises(DataError, match=r":3: .*passage 'no-such-passage' is not in the corpus"):
        read_rankings(job, positions)


def _truncate_last_line(path: Path) -> int:
    """Cut the file in the middle of its last line, as a full disk or a kill would; returns
    that line's number."""
    text = path.read_text(encoding="utf-8")
    number = len(text.splitlines())
    path.write_text(text[: len(text) - len(text.splitlines()[-1]) // 2 - 1], encoding="utf-8")
    return number


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_run_compare_over_a_truncated_rankings_file_exits_2_naming_its_line(
    routed: tuple[JobResult, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = copied(routed[1], tmp_path)
    number = _truncate_last_line(job / names.RANKINGS)
    assert compare_main([str(job), "--no-write"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {job / names.RANKINGS}:{number}: malformed JSON: "), err


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_a_truncated_metrics_json_names_its_line(
    routed: tuple[JobResult, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = copied(routed[1], tmp_path)
    text = (job / names.METRICS).read_text(encoding="utf-8")
    (job / names.METRICS).write_text(text[: len(text) // 2], encoding="utf-8")
    with pytest.raises(DataError, match=rf"^{job / names.METRICS}:1: malformed JSON: "):
        read_metrics(job)
    with pytest.raises(DataError, match=r":1: malformed JSON: "):
        to_dataframe(job)
    assert compare_main([str(job), "--no-write"]) == 2
    assert capsys.readouterr().err.startswith(f"error: {job / names.METRICS}:1: malformed JSON")
    assert rescore_main([str(job)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {job / names.METRICS}:1: malformed JSON: "), err
    # Nothing was written: the job stays as it was.
    assert not (job / names.RESCORED_METRICS).exists()


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_a_perturbed_variant_keeps_its_link_to_the_original(
    routed: tuple[JobResult, Path], tmp_path: Path
) -> None:
    """A variant's line names its original (`QueryRecord.to_json`); the light record keeps it,
    so the explorer of a sweep read back shows the variant beside its original."""
    job = copied(routed[1], tmp_path)
    records = lines(job / names.RANKINGS)
    first, second = records[0]["query_id"], records[1]["query_id"]
    records[1].update(perturbed_from=first, perturbation={"kind": "t2s"})
    write_lines(job / names.RANKINGS, records)
    read = {r.query.query_id: r.query for r in read_rankings(job)}
    assert read[second].perturbed_from == first
    assert read[second].meta["perturbation"] == {"kind": "t2s"}
    assert read[first].perturbed_from is None
    records[1]["perturbed_from"] = 3
    write_lines(job / names.RANKINGS, records)
    with pytest.raises(DataError, match=r":2: .*'perturbed_from' must be a query id"):
        read_rankings(job)


def test_a_job_without_top_k_in_its_config_takes_its_smallest_cutoff(tmp_path: Path) -> None:
    """A folder whose config says no top_k (written by another tool, or an old run): K is the
    smallest cut-off its metrics.json scored; with none, it cannot be told (named)."""
    from retrieval_bench.jobdir.read import FinishedJob, JobFolderError

    def job(metrics: dict) -> FinishedJob:  # type: ignore[type-arg]
        return FinishedJob(
            path=tmp_path / "j", metrics=metrics, config={"dataset": {"name": "d"}},
            overrides={}, choices={}, num=None,
        )  # fmt: skip

    found = job({"cutoffs": [10, 6, 20], "stages": {}})
    assert found.top_k == 6 and found.resolve_metric("recall@K") == "recall@6"
    assert found.resolve_metric("ndcg@20") == "ndcg@20"
    with pytest.raises(JobFolderError, match=r"j: cannot tell its top_k"):
        _ = job({"stages": {}}).top_k
