"""`python -m run.score` and the native evaluation-set reader it uses."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from retrieval_bench.data.evalset import load_evalset
from retrieval_bench.data.trec import write_qrels, write_run
from retrieval_bench.errors import DataError
from run.score import main

SRC = ROOT / "src"

TEACHING_QRELS = {"A": {"a": 1, "b": 1, "c": 1}, "B": {"d": 1}, "C": {"e": 1}}
TEACHING_RUN = {"A": ["a", "x", "b", "c"], "B": ["x", "d"], "C": ["x", "y"]}


def _write_teaching_run(path: Path) -> None:
    # Descending scores keep the intended order whatever trec_eval's tie-break would do.
    write_run(
        path, {q: [(d, 10.0 - i) for i, d in enumerate(ids)] for q, ids in TEACHING_RUN.items()}
    )


def _evalset_line(qid: str, status: str, relevant: list[str], **extra: object) -> str:
    record = {
        "query_id": qid,
        "query": f"question {qid}",
        "query_type": "fact",
        "label_status": status,
        "relevant_ids": relevant,
        **extra,
    }
    return json.dumps(record) + "\n"


def test_cli_reproduces_teaching_case_from_trec_qrels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_qrels(tmp_path / "qrels.trec", TEACHING_QRELS)
    _write_teaching_run(tmp_path / "final.run")
    code = main([str(tmp_path / "qrels.trec"), str(tmp_path / "final.run"), "-k", "2", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    overall = out["overall"]
    assert overall["recall@2"] == pytest.approx(4 / 9, abs=1e-12)
    assert overall["recall_pooled@2"] == pytest.approx(2 / 5, abs=1e-12)
    assert overall["hit@2"] == pytest.approx(2 / 3, abs=1e-12)
    assert overall["all_hit@2"] == pytest.approx(1 / 3, abs=1e-12)
    assert out["counts"]["scored"] == 3


@pytest.mark.slow
def test_cli_table_from_native_evalset_as_a_subprocess(tmp_path: Path) -> None:
    evalset = tmp_path / "set.jsonl"
    evalset.write_text(
        _evalset_line("A", "reviewed", ["a", "b", "c"])
        + _evalset_line("B", "reviewed", ["d"])
        + _evalset_line("C", "reviewed", ["e"])
        + _evalset_line("U", "unreviewed", ["a"])
        + _evalset_line("N", "no_answer", [])
    )
    _write_teaching_run(tmp_path / "final.run")
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    proc = subprocess.run(
        [sys.executable, "-m", "run.score", str(evalset), str(tmp_path / "final.run"), "-k", "2"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    rows = dict(line.split(maxsplit=1) for line in proc.stdout.splitlines()[1:19])
    assert rows["recall@2"] == f"{4 / 9:.4f}"
    assert rows["recall_pooled@2"] == "0.4000"
    assert rows["hit@2"] == f"{2 / 3:.4f}"
    assert rows["all_hit@2"] == f"{1 / 3:.4f}"
    assert "scored: 3" in proc.stdout
    assert "excluded (unreviewed): 1" in proc.stdout
    assert "excluded (no_answer): 1" in proc.stdout


def test_cli_all_excluded_prints_undefined(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    evalset = tmp_path / "set.jsonl"
    evalset.write_text(_evalset_line("U", "unreviewed", ["a"]))
    _write_teaching_run(tmp_path / "final.run")
    assert main([str(evalset), str(tmp_path / "final.run"), "-k", "5"]) == 0
    out = capsys.readouterr().out
    assert "recall@5" in out and "undefined" in out
    assert "no scorable queries (excluded: unreviewed=1)" in out


@pytest.mark.parametrize("k", ["0", "-3", "two", "1.5"])
def test_cli_rejects_bad_cutoffs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], k: str
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["q", "r", "-k", k])
    assert info.value.code == 2
    assert "cut-off" in capsys.readouterr().err


def test_cli_requires_a_cutoff(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["q", "r"])
    assert info.value.code == 2


def test_cli_data_errors_exit_2_with_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_qrels(tmp_path / "qrels.trec", TEACHING_QRELS)
    bad_run = tmp_path / "bad.run"
    bad_run.write_text("A Q0 a 1 1.0 t\nA Q0 a 2 0.5 t\n")
    assert main([str(tmp_path / "qrels.trec"), str(bad_run), "-k", "2"]) == 2
    err = capsys.readouterr().err
    assert f"{bad_run}:2:" in err and "twice" in err

    assert main([str(tmp_path / "missing.trec"), str(bad_run), "-k", "2"]) == 2
    assert "missing.trec" in capsys.readouterr().err


# --- native evaluation set reader ---------------------------------------------------------


def test_load_evalset_grades(tmp_path: Path) -> None:
    path = tmp_path / "set.jsonl"
    path.write_text(
        _evalset_line("q1", "reviewed", ["a", "b"], relevance={"b": 3, "n": 0}, notes="x")
        + "\n"
        + _evalset_line("q2", "no_answer", [])
    )
    q1, q2 = load_evalset(path)
    assert q1.relevance == {"a": 1, "b": 3, "n": 0}
    assert q1.relevant_ids == ("a", "b")
    assert (q2.query_id, q2.label_status, q2.relevance) == ("q2", "no_answer", {})


def test_load_evalset_keeps_optional_fields(tmp_path: Path) -> None:
    path = tmp_path / "set.jsonl"
    extra = {
        "expected_entities": ["E1"],
        "negative_entities": ["E2"],
        "expected_cities": ["Paris"],
        "user_role": "staff",
        "hops": [["a"], ["b", "c"]],
        "reference_answer": "42",
        "notes": "n",
    }
    path.write_text(_evalset_line("q", "reviewed", ["a"], **extra))
    (q,) = load_evalset(path)
    assert q.expected_entities == ("E1",) and q.negative_entities == ("E2",)
    assert q.expected_cities == ("Paris",) and q.user_role == "staff"
    assert q.hops == (("a",), ("b", "c")) and q.reference_answer == "42" and q.notes == "n"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "malformed JSON"),
        ("[1, 2]", "expected a JSON object"),
        (json.dumps({"query_id": "q", "query": "x", "query_type": "t"}), "'label_status'"),
        (_evalset_line("q", "maybe", []).strip(), "label_status 'maybe'"),
        (_evalset_line("q", "reviewed", "a").strip(), "relevant_ids"),
        (_evalset_line("q", "reviewed", ["a", "a"]).strip(), "'a' twice"),
        (_evalset_line("q", "reviewed", ["a"], relevance={"a": 0}).strip(), "grade 0"),
        (_evalset_line("q", "reviewed", [], relevance={"a": 1.5}).strip(), "integer"),
        (_evalset_line("first", "reviewed", ["a"]).strip(), "duplicate query_id 'first'"),
        (_evalset_line("q", "reviewed", ["a"], hops=["a"]).strip(), "'hops'"),
        (_evalset_line("q", "reviewed", ["a"], user_role=3).strip(), "'user_role'"),
        (_evalset_line("q", "reviewed", ["a"], expected_cities="x").strip(), "expected_cities"),
    ],
)
def test_load_evalset_errors_name_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "set.jsonl"
    path.write_text(_evalset_line("first", "reviewed", ["a"]) + line + "\n")
    with pytest.raises(DataError, match=message) as info:
        load_evalset(path)
    assert info.value.line == 2
    assert str(info.value).startswith(f"{path}:2: ")


def test_gzipped_qrels_and_run_score_as_the_plain_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # TREC runs and qrels are usually shipped gzipped: read as they are, whatever the name.
    write_qrels(tmp_path / "qrels.trec", TEACHING_QRELS)
    _write_teaching_run(tmp_path / "final.run")
    for name in ("qrels.trec", "final.run"):
        (tmp_path / f"{name}.gz").write_bytes(gzip.compress((tmp_path / name).read_bytes()))
    outputs = []
    for qrels, run in (("qrels.trec", "final.run"), ("qrels.trec.gz", "final.run.gz")):
        assert main([str(tmp_path / qrels), str(tmp_path / run), "-k", "2", "--json"]) == 0
        outputs.append(json.loads(capsys.readouterr().out))
    assert outputs[0] == outputs[1]
    assert outputs[1]["counts"]["scored"] == 3


def test_complete_scores_only_scorable_missing_queries_as_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # q1 is in the run; q2 (scorable) and q3 (unreviewed: excluded) are not. --complete scores
    # q2 as an empty ranking; q3 stays excluded, never a 0.
    evalset = tmp_path / "evalset.jsonl"
    evalset.write_text(
        _evalset_line("q1", "reviewed", ["a"])
        + _evalset_line("q2", "reviewed", ["b"])
        + _evalset_line("q3", "unreviewed", ["c"])
    )
    write_run(tmp_path / "x.run", {"q1": [("a", 1.0)]})
    assert main([str(evalset), str(tmp_path / "x.run"), "-k", "1", "--complete", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["counts"]["not_in_run_scored_0"] == 1
    assert out["counts"]["scored"] == 2
    assert out["counts"]["excluded"] == {"unreviewed": 1}
    assert out["overall"]["recall@1"] == 0.5
