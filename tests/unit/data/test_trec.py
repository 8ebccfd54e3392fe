"""TREC run and qrels files: trec_eval's order, exact round trips, errors with file:line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from retrieval_bench.data.trec import (
    read_qrels,
    read_run,
    run_rankings,
    trec_order,
    write_qrels,
    write_run,
)
from retrieval_bench.errors import DataError


def test_trec_order_is_score_desc_then_docid_desc() -> None:
    pairs = [("a", 1.0), ("c", 2.0), ("b", 1.0), ("d10", 1.0), ("d9", 1.0)]
    assert [d for d, _ in trec_order(pairs)] == ["c", "d9", "d10", "b", "a"]


def test_write_run_bytes(tmp_path: Path) -> None:
    path = tmp_path / "out" / "final.run"
    write_run(path, {"q2": [("x", 0.5)], "q1": {"a": 1.0, "b": 1.0, "c": 0.1}}, tag="bm25")
    assert path.read_bytes() == (
        b"q1 Q0 b 1 1.0 bm25\nq1 Q0 a 2 1.0 bm25\nq1 Q0 c 3 0.1 bm25\nq2 Q0 x 1 0.5 bm25\n"
    )


def test_run_round_trip_is_exact_and_deterministic(tmp_path: Path) -> None:
    run = {
        "q1": [("p1", 0.1 + 0.2), ("p2", 1e-300), ("p3", -2.5e17), ("p4", 1 / 3)],
        "q2": [("doc-é", 3.0), ("doc-a", 3.0)],
    }
    first, second = tmp_path / "a.run", tmp_path / "b.run"
    write_run(first, run)
    write_run(second, dict(reversed(list(run.items()))))
    assert first.read_bytes() == second.read_bytes()
    back = read_run(first)
    assert back == {q: trec_order(pairs) for q, pairs in run.items()}
    assert run_rankings(back) == {"q1": ["p4", "p1", "p2", "p3"], "q2": ["doc-é", "doc-a"]}
    assert sorted(os.listdir(tmp_path)) == ["a.run", "b.run"]  # no temp files left


def test_read_run_ignores_rank_column_and_resorts(tmp_path: Path) -> None:
    path = tmp_path / "r.run"
    path.write_text("q Q0 a 1 0.5 t\nq Q0 b 2 0.9 t\n\nq Q0 c 3 0.9 t\n")
    assert run_rankings(read_run(path)) == {"q": ["c", "b", "a"]}


def test_write_run_refuses_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "r.run"
    with pytest.raises(ValueError, match="twice"):
        write_run(path, {"q": [("a", 1.0), ("a", 0.5)]})
    with pytest.raises(ValueError, match="non-finite"):
        write_run(path, {"q": [("a", float("nan"))]})
    with pytest.raises(ValueError, match="spaces"):
        write_run(path, {"q": [("a b", 1.0)]})
    with pytest.raises(ValueError, match="tag"):
        write_run(path, {"q": [("a", 1.0)]}, tag="two words")
    assert not path.exists()
    assert list(tmp_path.iterdir()) == []  # no temp files left behind


def test_failed_write_keeps_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "r.run"
    write_run(path, {"q": [("a", 1.0)]})
    before = path.read_bytes()
    with pytest.raises(ValueError):
        write_run(path, {"q": [("a", 1.0)], "r": [("b", float("inf"))]})
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("q Q0 a 1 0.5", "expected 6 fields"),
        ("q Q0 a 1 0.5 t extra", "expected 6 fields"),
        ("q Q0 a one 0.5 t", "rank 'one' is not an integer"),
        ("q Q0 a 1 high t", "score 'high'"),
        ("q Q0 a 1 nan t", "score 'nan'"),
        ("q Q0 a 1 inf t", "score 'inf'"),
    ],
)
def test_malformed_run_line_names_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "bad.run"
    path.write_text(f"q Q0 ok 1 1.0 t\n{line}\n")
    with pytest.raises(DataError, match=message) as info:
        read_run(path)
    assert info.value.line == 2
    assert str(info.value).startswith(f"{path}:2: ")


def test_duplicate_in_run_names_both_lines(tmp_path: Path) -> None:
    path = tmp_path / "dup.run"
    path.write_text("q Q0 a 1 1.0 t\nq Q0 b 2 0.9 t\nr Q0 a 1 1.0 t\nq Q0 a 3 0.1 t\n")
    with pytest.raises(DataError, match=r"dup.run:4: .*'a' appears twice \(first on line 1\)"):
        read_run(path)


def test_qrels_round_trip_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "qrels.trec"
    qrels = {"q2": {"b": 0, "a": 3}, "q1": {"z": -1, "c": 1}}
    write_qrels(path, qrels)
    assert path.read_text() == "q1 0 c 1\nq1 0 z -1\nq2 0 a 3\nq2 0 b 0\n"
    assert read_qrels(path) == qrels

    path.write_text("q 0 a 1\nq 0 b x\n")
    with pytest.raises(DataError, match=r"qrels.trec:2: grade 'x' is not an integer"):
        read_qrels(path)
    path.write_text("q 0 a 1\nq 0 b\n")
    with pytest.raises(DataError, match=r":2: expected 4 fields"):
        read_qrels(path)
    path.write_text("q 0 a 1\nq 0 b 1\nq 0 a 2\n")
    with pytest.raises(DataError, match=r":3: .*'a' judged twice \(first on line 1\)"):
        read_qrels(path)
    with pytest.raises(ValueError):
        write_qrels(path, {"q": {"a": 1.5}})  # type: ignore[dict-item]


def test_invalid_utf8_is_a_data_error(tmp_path: Path) -> None:
    path = tmp_path / "bin.run"
    path.write_bytes(b"q Q0 \xff 1 1.0 t\n")
    with pytest.raises(DataError, match="UTF-8"):
        read_run(path)
