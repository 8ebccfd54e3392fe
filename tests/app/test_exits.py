"""Exit codes, Ctrl-C, unfinished job folders, a folder per concurrent job (issue 9, items 1,
6, 9 and 11's "nothing scored")."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURE, ROOT, mini_overrides
from hydra.errors import ConfigCompositionException, OverrideParseException
from omegaconf.errors import ValidationError

import run.__main__ as app
from retrieval_bench.errors import (
    ConfigError,
    DataError,
    Interrupted,
    NothingScored,
    interrupt_leaves,
)
from retrieval_bench.jobdir import marker
from retrieval_bench.jobdir.names import UNFINISHED as UNFINISHED_MARKER
from run import compare as compare_cli
from run import score as score_cli
from run.exits import guarded, report

CONTRACT_FILES = ("rankings.jsonl", "qrels.trec", "metrics.json", "manifest.json", "report.md")
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONUNBUFFERED": "1"}
ENV.pop("HYDRA_FULL_ERROR", None)


def _stderr_lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().err.splitlines()


# -- the mapping, in-process ------------------------------------------------------------------
@pytest.mark.parametrize(
    "exc",
    [
        ConfigError("top_k", "must be a positive integer, got 0"),
        DataError("evalsets/x.jsonl", "unknown field 'expected_entites'", line=3),
        ConfigCompositionException("Could not override 'retriever.poolsize'."),
        OverrideParseException("top_k=[1", "no viable alternative at input '[1'"),
        ValidationError("Value 'abc' could not be converted to Integer"),
    ],
)
def test_bad_input_and_config_exit_2_with_one_error_line(
    exc: Exception, capsys: pytest.CaptureFixture[str]
) -> None:
    assert report(exc) == 2
    assert _stderr_lines(capsys) == [f"error: {exc}"]


def test_an_internal_error_exits_3_naming_where_its_traceback_is(
    capsys: pytest.CaptureFixture[str],
) -> None:
    try:
        raise RuntimeError("boom")
    except RuntimeError as exc:
        assert report(exc) == 3
    [line] = _stderr_lines(capsys)
    assert line.startswith("internal error: RuntimeError: boom (traceback in ")
    logged = Path(line.split("(traceback in ", 1)[1].split(")", 1)[0])
    text = logged.read_text()
    assert "Traceback (most recent call last)" in text and "RuntimeError: boom" in text
    logged.unlink()


def test_hydra_full_error_also_prints_the_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    try:
        raise RuntimeError("boom")
    except RuntimeError as exc:
        assert report(exc, full_traceback=True) == 3
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last)")
    last = err.splitlines()[-1]
    assert last.startswith("internal error: RuntimeError: boom (traceback in ")
    Path(last.split("(traceback in ", 1)[1].split(")", 1)[0]).unlink()


def test_ctrl_c_exits_130_saying_what_is_unfinished(capsys: pytest.CaptureFixture[str]) -> None:
    with (
        pytest.raises(Interrupted) as info,
        interrupt_leaves("the month"),
        interrupt_leaves("job folder x is unfinished"),
    ):
        raise KeyboardInterrupt
    assert report(info.value) == 130
    assert report(KeyboardInterrupt()) == 130
    assert _stderr_lines(capsys) == [
        "interrupted; job folder x is unfinished",
        "interrupted; no file was left half-written",
    ]


def test_sigterm_is_handled_as_ctrl_c_exit_143(capsys: pytest.CaptureFixture[str]) -> None:
    before = signal.getsignal(signal.SIGTERM)

    def main() -> int:
        with interrupt_leaves("job folder x is unfinished"):
            os.kill(os.getpid(), signal.SIGTERM)  # a real signal: `kill PID`
            time.sleep(30)  # the handler raises before this returns
        return 0

    assert guarded(main) == 143
    assert _stderr_lines(capsys) == ["terminated (SIGTERM); job folder x is unfinished"]
    assert signal.getsignal(signal.SIGTERM) is before  # restored after the command


@pytest.mark.usefixtures("app_logging")
@pytest.mark.parametrize("again", [False, True], ids=["once", "again-while-marking"])
def test_sigterm_in_a_job_marks_its_folder_terminated_not_running(
    again: bool,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # `again`: a benchmark sweep gets its parent-death SIGTERM once per thread of the dying
    # driver; the next one lands while the job rewrites its marker, which must still say so.
    def run_job(cfg: object) -> None:  # SIGTERM while the job works
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)

    def mark_unfinished(job_dir: Path, state: str) -> None:
        if again and state != "running":
            os.kill(os.getpid(), signal.SIGTERM)  # its handler runs before the next line
        marker.mark_unfinished(job_dir, state)

    monkeypatch.setattr(app, "run_job", run_job)
    monkeypatch.setattr(app, "mark_unfinished", mark_unfinished)
    job_dir = tmp_path / "job"
    monkeypatch.setattr(sys, "argv", ["run", *mini_overrides(tmp_path), f"hydra.run.dir={job_dir}"])
    assert app.main() == 143
    assert capsys.readouterr().err == (
        f"terminated (SIGTERM); job folder {job_dir} is unfinished (marked UNFINISHED)\n"
    )
    assert (job_dir / UNFINISHED_MARKER).read_text().startswith("terminated (SIGTERM) (")


@pytest.mark.parametrize(
    ("override", "says"),
    [
        ("retriever=hybird", "hybird"),
        # An unknown key gets its nearest name, not Hydra's advice to append it with `+`.
        ("retriever.poolsize=5", "config key 'retriever.poolsize': unknown key; did you mean "
         "'retriever.pool_size'?"),
        ("arms.service.retires=3", "config key 'arms.service.retires': unknown key; did you mean "
         "'arms.service.retries'?"),
        ("retriever.zzzz=5", "Key 'zzzz' not in 'RetrieverConfig'"),  # nothing close
        ("top_k=[1", "no viable alternative"),
        ("top_k=abc", "Value 'abc' of type 'str' could not be converted to Integer"),
    ],
)
def test_hydras_own_errors_exit_2(
    override: str, says: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", ["run", override])
    assert app.main() == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and says in err and "Traceback" not in err
    assert "HYDRA_FULL_ERROR" not in os.environ  # main() restores the user's environment


def test_hydras_usage_exit_1_becomes_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", ["run", "--cfg", "job", "--package", "nope"])
    assert app.main() == 2
    assert "package 'nope' not found in config" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["-m", "retriever=bm25,dense", "--cfg", "job"], "--multirun and --cfg job cannot go"),
        (["--cfg", "job", "--info", "config"], "--cfg job and --info config cannot go"),
    ],
)
def test_two_of_hydras_modes_together_exit_2_naming_both(
    argv: list[str], says: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Hydra refuses them with a bare ValueError, which read as this project's bug (exit 3)."""
    monkeypatch.setattr(sys, "argv", ["run", *argv])
    assert app.main() == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and says in err and "internal error" not in err


def _metrics(scored: int) -> dict[str, Any]:
    counts = {"scored": scored, "excluded": {"unreviewed": 2, "no_answer": 1}}
    return {"stages": {"bm25": {"counts": dict(counts)}, "final": {"counts": dict(counts)}}}


def test_a_job_that_scored_nothing_fails_with_the_excluded_counts(tmp_path: Path) -> None:
    app._check_scored(_metrics(scored=1), tmp_path)
    with pytest.raises(NothingScored) as info:
        app._check_scored(_metrics(scored=0), tmp_path)
    assert str(info.value) == (
        "nothing was scored: every stage scored 0 queries (excluded: unreviewed 2, "
        f"no_answer 1); outputs in {tmp_path}"
    )


def test_score_and_compare_map_internal_errors_and_interrupts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    qrels, run = tmp_path / "qrels.trec", tmp_path / "x.run"
    qrels.write_text("q1 0 d1 1\n")
    run.write_text("q1 Q0 d1 1 1.0 t\n")

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(score_cli, "score_rankings", boom)
    assert score_cli.main([str(qrels), str(run), "-k", "5"]) == 3
    monkeypatch.setattr(compare_cli, "compare_dirs", boom)
    assert compare_cli.main([str(tmp_path)]) == 3
    lines = _stderr_lines(capsys)
    assert len(lines) == 2
    assert all(line.startswith("internal error: RuntimeError: boom") for line in lines)

    def interrupt(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(score_cli, "score_rankings", interrupt)
    assert score_cli.main([str(qrels), str(run), "-k", "5"]) == 130
    assert _stderr_lines(capsys) == ["interrupted; no file was left half-written"]


# -- end to end, one subprocess per entry point -----------------------------------------------
def _python(*args: str, cwd: Path = ROOT, umask: int | None = None) -> subprocess.Popen[str]:
    """A fresh `python` as a shell starts one: SIGINT and SIGTERM at their defaults and not
    blocked, whatever this worker's state (a signal ignored or blocked here is inherited, and a
    Ctrl-C test's own SIGINT would then never arrive)."""

    def started_as_from_a_shell() -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
        if umask is not None:
            os.umask(umask)

    return subprocess.Popen(
        [sys.executable, *args],
        cwd=cwd,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=started_as_from_a_shell,
    )


def _finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=600)
    return proc.returncode, out, err


def _patched_app(patch: str, args: list[str], cwd: Path = ROOT) -> tuple[int, str, str]:
    """`python -m run ARGS` with `patch` applied to run.__main__ (as `app`) first."""
    code = "import sys\nimport run.__main__ as app\n" + textwrap.dedent(patch)
    code += f"\nsys.argv = ['run', *{args!r}]\nsys.exit(app.main())\n"
    return _finish(_python("-c", code, cwd=cwd))


@pytest.mark.slow
def test_entry_points_exit_2_on_bad_input_without_traceback(tmp_path: Path) -> None:
    runs = {
        "run": _python("-m", "run", "top_k=abc", f"hydra.run.dir={tmp_path / 'r'}"),
        "score": _python("-m", "run.score", str(tmp_path / "no.qrels"), "x.run", "-k", "5"),
        "compare": _python("-m", "run.compare", str(tmp_path / "nope")),
    }
    for name, proc in runs.items():
        code, _, err = _finish(proc)
        assert code == 2, (name, err)
        assert err.startswith("error: ") and "Traceback" not in err, (name, err)


@pytest.mark.slow
def test_output_closed_by_its_reader_exits_141_silently() -> None:
    """`python -m run.plugins | head`: the reader is gone before the listing is written, which is
    nothing wrong with the command (was: exit 3, "internal error: BrokenPipeError ... please
    report it"). The pipe's read end is closed before the command starts, so every write fails."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "run.plugins"],
            cwd=ROOT,
            env=ENV,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=600,
        )
    finally:
        os.close(write_end)
    assert (proc.returncode, proc.stderr) == (141, "")


@pytest.mark.slow
def test_two_runs_started_together_get_a_folder_each(tmp_path: Path) -> None:
    """The issue's repro: same command, same second, default job folders (cwd = tmp_path);
    then the same with one fixed name, so the collision is certain."""
    common = ["-m", "run", "retriever=bm25", *mini_overrides(tmp_path)]
    for extra in ([], ["hydra.run.dir=${new_dir:" + str(tmp_path / "fixed") + "}"]):
        procs = [_python(*common, f"top_k={k}", *extra, cwd=tmp_path, umask=0o007) for k in (6, 10)]
        results = [_finish(p) for p in procs]
        assert [r[0] for r in results] == [0, 0], [r[2] for r in results]
        dirs = [Path(r[1].rsplit("outputs: ", 1)[1].split()[0]) for r in results]
        dirs = [d if d.is_absolute() else tmp_path / d for d in dirs]
        assert dirs[0] != dirs[1]
        if extra:
            assert sorted(d.name for d in dirs) == ["fixed", "fixed-2"]
        for job_dir, k in zip(dirs, (6, 10), strict=True):
            assert all((job_dir / name).is_file() for name in CONTRACT_FILES)
            assert not (job_dir / UNFINISHED_MARKER).exists()
            manifest = json.loads((job_dir / "manifest.json").read_text())
            assert manifest["config"]["top_k"] == k
            # Every file of the job, its own and Hydra's, is readable as the umask allows.
            modes = {stat.S_IMODE(p.stat().st_mode) for p in job_dir.rglob("*") if p.is_file()}
            assert modes == {0o660}


@pytest.mark.slow
def test_two_sweeps_started_together_get_a_folder_each(tmp_path: Path) -> None:
    sweep = "hydra.sweep.dir=${new_dir:" + str(tmp_path / "sweep") + "}"
    args = ["-m", "run", "-m", "retriever=bm25", "top_k=4,6", *mini_overrides(tmp_path), sweep]
    results = [_finish(p) for p in [_python(*args), _python(*args)]]
    assert [r[0] for r in results] == [0, 0], [r[2] for r in results]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("sweep")) == [
        "sweep",
        "sweep-2",
    ]
    for name in ("sweep", "sweep-2"):
        jobs = sorted(p for p in (tmp_path / name).iterdir() if p.is_dir())
        assert [p.name.split("-")[0] for p in jobs] == ["0", "1"]
        for job in jobs:
            assert all((job / file).is_file() for file in CONTRACT_FILES)
        assert (tmp_path / name / "comparison.json").is_file()


@pytest.mark.slow
def test_ctrl_c_in_a_job_exits_130_and_leaves_it_marked(tmp_path: Path) -> None:
    job_dir = tmp_path / "job"
    patch = """
        import os, signal, time
        def run_job(cfg):  # Ctrl-C while the job works
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(30)
        app.run_job = run_job
    """
    code, _, err = _patched_app(patch, [*mini_overrides(tmp_path), f"hydra.run.dir={job_dir}"])
    assert code == 130, err
    assert err == f"interrupted; job folder {job_dir} is unfinished (marked UNFINISHED)\n"
    assert (job_dir / UNFINISHED_MARKER).read_text().startswith("interrupted (")
    # run.compare names it instead of skipping it silently.
    code, _, err = _finish(_python("-m", "run.compare", str(tmp_path)))
    assert code == 2
    assert err.startswith(f"error: no finished job to compare; skipped {job_dir}: unfinished: ")


@pytest.mark.slow
def test_a_job_killed_outright_reads_interrupted_not_running(tmp_path: Path) -> None:
    """SIGKILL leaves no chance to rewrite the marker: it still says `running`, and the
    readers judge it by its process (before: "running (..., pid N)" forever)."""
    job_dir = tmp_path / "job"
    script = textwrap.dedent(
        f"""
        import sys, time
        import run.__main__ as app
        def run_job(cfg):  # a job at work, until it is killed
            time.sleep(600)
        app.run_job = run_job
        sys.argv = ['run', *{[*mini_overrides(tmp_path), f"hydra.run.dir={job_dir}"]!r}]
        sys.exit(app.main())
        """
    )
    proc = _python("-c", script)
    marker = job_dir / UNFINISHED_MARKER
    try:
        for _ in range(1200):  # the marker is the job's first file
            if marker.is_file() or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert marker.read_text().startswith("running (")
    finally:
        proc.kill()
        proc.communicate()
    assert marker.read_text().startswith("running (")  # as the killed job left it
    code, _, err = _finish(_python("-m", "run.compare", str(tmp_path)))
    assert code == 2
    assert err == (
        f"error: no finished job to compare; skipped {job_dir}: unfinished: "
        f"interrupted (process {proc.pid} is gone)\n"
    )


@pytest.mark.slow
def test_ctrl_c_in_the_monthly_job_exits_130_with_one_line(tmp_path: Path) -> None:
    patch = """
        import os, signal, time
        from run import monthly
        def launch(*args, **kwargs):  # Ctrl-C while the month's jobs run
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(30)
        monthly._launch = launch
    """
    args = [
        "experiment=monthly",
        "benchmark.month=2026-09",
        f"benchmark.root={tmp_path / 'bench'}",
        "benchmark.retrievers=[bm25]",
        *mini_overrides(tmp_path),
        f"hydra.run.dir={tmp_path / 'driver'}",
    ]
    code, _, err = _patched_app(patch, args)
    assert code == 130, err
    month = tmp_path / "bench" / "2026-09"
    assert err == (
        f"interrupted; benchmark {month} is unfinished: rerun the same command to resume\n"
    )


@pytest.mark.slow
def test_an_internal_error_in_a_job_exits_3_with_its_log(tmp_path: Path) -> None:
    job_dir = tmp_path / "job"
    patch = """
        def run_job(cfg):
            raise RuntimeError("boom")
        app.run_job = run_job
    """
    code, _, err = _patched_app(patch, [*mini_overrides(tmp_path), f"hydra.run.dir={job_dir}"])
    assert code == 3
    log = job_dir / "__main__.log"
    assert err == (f"internal error: RuntimeError: boom (traceback in {log}); please report it\n")
    assert "Traceback (most recent call last)" in log.read_text()
    marker = (job_dir / UNFINISHED_MARKER).read_text()
    assert marker.startswith(f"failed: internal error RuntimeError (see {log})")


@pytest.mark.slow
def test_a_job_that_scored_nothing_writes_its_outputs_then_exits_2(tmp_path: Path) -> None:
    evalset = tmp_path / "unreviewed.jsonl"
    rows = [json.loads(line) for line in (FIXTURE / "evalsets" / "mini.jsonl").open()]
    evalset.write_text(
        "".join(json.dumps({**r, "label_status": "unreviewed"}) + "\n" for r in rows[:3])
    )
    job_dir = tmp_path / "job"
    args = [*mini_overrides(tmp_path), f"dataset.evalset={evalset}", "retriever=bm25"]
    code, _, err = _finish(_python("-m", "run", *args, f"hydra.run.dir={job_dir}"))
    assert code == 2
    assert err == (
        "error: nothing was scored: every stage scored 0 queries (excluded: unreviewed 3); "
        f"outputs in {job_dir}\n"
    )
    assert all((job_dir / name).is_file() for name in CONTRACT_FILES)
