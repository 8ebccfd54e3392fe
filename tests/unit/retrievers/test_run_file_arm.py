"""The run_file arm on its own: what it reads, what it counts, how it filters and orders."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from retrieval_bench.config import RunConfig
from retrieval_bench.errors import ConfigError, DataError, NothingUsable
from retrieval_bench.protocols import BuildContext
from retrieval_bench.records import FILTERED_OUT, EvalQuery, Passage
from retrieval_bench.retrievers.run_file import NO_KNOWN_IDS, NOT_IN_RUN, RunFileArm, RunFileArmSpec
from retrieval_bench.tiebreak import shared_tie_break

IDS = ["p1", "p2", "p3", "p4", "p5"]


def _context(tmp_path: Path) -> BuildContext:
    passages = [Passage(id=pid, text=f"text {pid}") for pid in IDS]
    queries = [EvalQuery(q, f"query {q}", "t", "reviewed", {"p1": 1}) for q in ("q1", "q2", "q3")]
    return BuildContext(passages, queries, RunConfig(), shared_tie_break(IDS), tmp_path)


def _write(tmp_path: Path, lines: list[str], name: str = "other.run") -> Path:
    path = tmp_path / name
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def _ids(arm: RunFileArm, qid: str, k: int, mask: np.ndarray | None = None) -> list[str]:
    query = EvalQuery(qid, "", "t", "reviewed")
    ranked = arm.search([query], k, [mask])[0]
    assert ranked.requested == k
    return [IDS[i] for i in ranked.indices.tolist()]


def test_each_bad_input_is_counted_and_named(tmp_path: Path) -> None:
    run = _write(
        tmp_path,
        [
            "q1 Q0 p1 1 3.0 sys",
            "q1 Q0 ghost 2 2.5 sys",  # unknown id
            "q1 Q0 p2 3 2.0 sys",
            "q1 Q0 p1 4 1.0 sys",  # duplicate: the first line's 3.0 is kept
            "q2 Q0 nowhere 1 1.0 sys",  # q2's only id is unknown
            "q9 Q0 p3 1 1.0 sys",  # q9 is not in the evaluation set
        ],
    )
    arm = RunFileArmSpec(path=str(run)).build("run_file", _context(tmp_path))
    info = arm.info()
    assert {key: info[key] for key in info if key not in ("path", "sha256", "examples")} == {
        "kind": "run_file",
        "lines": 6,
        "queries": 3,
        "bad_input": {
            "unknown_ids": 2,
            "duplicates": 1,
            "queries_not_in_evalset": 1,
            "queries_not_in_run": 1,
            "queries_without_known_ids": 1,
        },
    }
    assert info["examples"] == {
        "unknown_ids": ["q1 ghost", "q2 nowhere"],
        "duplicates": [f"{run}:4 q1 p1"],
        "queries_not_in_evalset": ["q9"],
        "queries_not_in_run": ["q3"],
    }
    queries = [EvalQuery(q, "", "t", "reviewed") for q in ("q1", "q2", "q3")]
    q1, q2, q3 = arm.search(queries, 10, [None, None, None])
    assert [IDS[i] for i in q1.indices.tolist()] == ["p1", "p2"]
    assert q1.scores.tolist() == [3.0, 2.0]
    assert q1.empty_reason is None
    assert (q2.returned, q2.empty_reason) == (0, NO_KNOWN_IDS)
    assert (q3.returned, q3.empty_reason) == (0, NOT_IN_RUN)


def test_a_clean_run_has_nothing_to_report(tmp_path: Path) -> None:
    run = _write(tmp_path, [f"{q} Q0 p1 1 1.0 sys" for q in ("q1", "q2", "q3")])
    arm = RunFileArmSpec(path=str(run)).build("run_file", _context(tmp_path))
    assert not any(arm.info()["bad_input"].values())


def test_ties_follow_trec_eval_order_and_the_cut_is_k(tmp_path: Path) -> None:
    # The rank column is ignored: score descending, then id descending, as trec_eval orders.
    run = _write(
        tmp_path,
        ["q1 Q0 p1 1 1.0 s", "q1 Q0 p4 2 1.0 s", "q1 Q0 p2 3 5.0 s", "q1 Q0 p3 4 1.0 s"],
    )
    arm = RunFileArmSpec(path=str(run)).build("run_file", _context(tmp_path))
    assert _ids(arm, "q1", 10) == ["p2", "p4", "p3", "p1"]
    assert _ids(arm, "q1", 2) == ["p2", "p4"]


def test_the_mask_applies_before_the_cut(tmp_path: Path) -> None:
    run = _write(tmp_path, [f"q1 Q0 p{i} {i} {10 - i}.0 s" for i in range(1, 6)])
    arm = RunFileArmSpec(path=str(run)).build("run_file", _context(tmp_path))
    mask = np.array([False, True, False, True, True])
    # Cut after filtering: the allowed p2, p4 fill the top 2 (a cut first would keep p1, p2).
    assert _ids(arm, "q1", 2, mask) == ["p2", "p4"]
    nothing = np.zeros(len(IDS), dtype=bool)
    ranked = arm.search([EvalQuery("q1", "", "t", "reviewed")], 2, [nothing])[0]
    assert (ranked.returned, ranked.empty_reason) == (0, FILTERED_OUT)


def test_two_nodes_with_two_paths_are_two_arms(tmp_path: Path) -> None:
    first = _write(tmp_path, ["q1 Q0 p1 1 1.0 a"], "a.run")
    second = _write(tmp_path, ["q1 Q0 p5 1 1.0 b"], "b.run")
    ctx = _context(tmp_path)
    assert _ids(RunFileArmSpec(path=str(first)).build("run_file", ctx), "q1", 5) == ["p1"]
    assert _ids(RunFileArmSpec(path=str(second)).build("other", ctx), "q1", 5) == ["p5"]


def test_a_missing_file_names_the_key_that_set_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"'arms\.run_file\.path': a run_file arm needs a TREC"):
        RunFileArmSpec().build("run_file", _context(tmp_path))
    with pytest.raises(ConfigError, match=r"'arms\.other\.path': run file .* does not exist"):
        RunFileArmSpec(path=str(tmp_path / "absent.run")).build("other", _context(tmp_path))


def test_a_malformed_line_names_file_and_line(tmp_path: Path) -> None:
    run = _write(tmp_path, ["q1 Q0 p1 1 1.0 s", "q1 Q0 p2 x 1.0 s"])
    with pytest.raises(DataError, match=rf"{run}:2: rank 'x' is not an integer"):
        RunFileArmSpec(path=str(run)).build("run_file", _context(tmp_path))


def test_the_path_is_required_only_when_the_arm_runs(tmp_path: Path) -> None:
    """The shipped node's empty path composes (no job runs every arm); an arm that runs is
    checked before any arm builds, naming its own key."""
    from conftest import compose_config

    from retrieval_bench.job.build import arm_specs, run_checks

    compose_config([])  # arms.run_file.path is empty, and fine: the job does not run it
    _, specs = arm_specs(["run_file"], RunConfig().arms)
    with pytest.raises(ConfigError, match=r"'arms\.run_file\.path'"):
        run_checks(specs, _context(tmp_path), "arm")
    run = _write(tmp_path, ["q1 Q0 p1 1 1.0 s"])
    _, specs = arm_specs(["mine"], {"mine": {**RunConfig().arms["run_file"], "path": str(run)}})
    run_checks(specs, _context(tmp_path), "arm")


def test_queries_outside_the_evalset_are_not_counted_as_without_known_ids(tmp_path: Path) -> None:
    # q8 is not asked and names no passage: it is `queries_not_in_evalset`, and only the
    # evaluation set's q2 is a query without known ids.
    run = _write(tmp_path, ["q1 Q0 p1 1 1.0 s", "q2 Q0 ghost 1 1.0 s", "q8 Q0 ghost 1 1.0 s"])
    info = RunFileArmSpec(path=str(run)).build("run_file", _context(tmp_path)).info()
    assert info["bad_input"]["queries_without_known_ids"] == 1
    assert info["bad_input"]["queries_not_in_evalset"] == 1


def test_a_folder_is_named_as_a_folder_not_as_missing(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        RunFileArmSpec(path=str(tmp_path)).build("run_file", _context(tmp_path))
    assert str(raised.value) == (
        f"config key 'arms.run_file.path': run file {str(tmp_path)!r} is a folder ({tmp_path}), "
        "not a TREC run: name the file"
    )


def test_a_gzipped_run_is_read_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "other.run.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write("q1 Q0 p2 1 2.0 s\nq1 Q0 p4 2 1.0 s\n")
    arm = RunFileArmSpec(path=str(path)).build("run_file", _context(tmp_path))
    assert _ids(arm, "q1", 5) == ["p2", "p4"]
    broken = tmp_path / "broken.run.gz"
    broken.write_bytes(path.read_bytes()[:20])
    with pytest.raises(DataError, match=rf"{broken}: not a readable gzip file"):
        RunFileArmSpec(path=str(broken)).build("run_file", _context(tmp_path))


@pytest.mark.parametrize(
    ("lines", "says"),
    [
        ([], "holds no run line: the arm has nothing to rank"),
        (
            ["t001 Q0 p1 1 1.0 s", "t002 Q0 p2 1 1.0 s"],
            "none of its 2 query ids is a query of the evaluation set (run: 't001', 't002'; "
            "evaluation set: 'q1', 'q2', 'q3'): a run of another evaluation set?",
        ),
        (
            ["q1 Q0 doc-a 1 2.0 s", "q2 Q0 doc-b 1 1.0 s", "q9 Q0 p1 1 1.0 s"],
            "none of the 2 ids it gives the evaluation set's queries is a passage of the corpus "
            "(e.g. 'doc-a', 'doc-b'): a run of another corpus, or of documents (a "
            "scoring.unit=doc export) where the arm ranks passages?",
        ),
    ],
)
def test_a_run_that_gives_nothing_to_rank_is_refused_naming_what_it_lacked(
    tmp_path: Path, lines: list[str], says: str
) -> None:
    run = _write(tmp_path, lines)
    with pytest.raises(NothingUsable) as raised:
        RunFileArmSpec(path=str(run)).build("mine", _context(tmp_path))
    assert str(raised.value) == f"arm 'mine': run file {run}" + (
        " " if says.startswith("holds") else ": "
    ) + says
