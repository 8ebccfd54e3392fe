"""What the project writes: strict JSON everywhere (a NaN in config included), and an output
path that cannot be a folder (its parent is a regular file) refused naming its key or flag
(issue 20, items 2 and 5)."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURE, ROOT, mini_overrides, run_in_process
from hydra import compose, initialize_config_dir

import run.__main__ as app
from retrieval_bench.config import RunConfig
from retrieval_bench.io.atomic import atomic_write_json
from retrieval_bench.io.strict_json import jsonl_text
from run import compare as compare_cli
from run import pool as pool_cli


def strict_load(text: str) -> Any:
    """json.loads refusing NaN and Infinity, as other tools' parsers do."""

    def refuse(constant: str) -> None:
        raise ValueError(f"not strict JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def test_json_writers_write_non_finite_floats_as_null(tmp_path: Path) -> None:
    atomic_write_json(tmp_path / "a.json", {"x": float("nan"), "y": [1.0, float("inf")]})
    assert strict_load((tmp_path / "a.json").read_text()) == {"x": None, "y": [1.0, None]}
    line = jsonl_text([{"score": float("-inf")}])
    assert strict_load(line) == {"score": None}


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_a_nan_in_config_leaves_manifest_json_strict(tmp_path: Path) -> None:
    overrides = [*mini_overrides(tmp_path), "retriever=bm25", "arms.bm25.epsilon=nan"]
    _, job = run_in_process(overrides, tmp_path)
    for name in ("manifest.json", "metrics.json"):
        strict_load((job / name).read_text())
    config = strict_load((job / "manifest.json").read_text())["config"]
    assert config["arms"]["bm25"]["epsilon"] is None


# -- an output path whose parent is a regular file: exit 2 naming the key or flag ------------
@pytest.fixture
def a_file(tmp_path: Path) -> Path:
    path = tmp_path / "notes.txt"
    path.write_text("a file, not a folder\n")
    return path


def _error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err, err
    return err


@pytest.mark.parametrize(
    ("args", "key"),
    [
        (["retriever=bm25", "hydra.run.dir={file}/job"], "hydra.run.dir"),
        (["-m", "retriever=bm25", "hydra.sweep.dir={file}/sweep"], "hydra.sweep.dir"),
        (["experiment=monthly", "benchmark.root={file}/benchmarks"], "benchmark.root"),
    ],
)
@pytest.mark.usefixtures("app_logging")
def test_an_app_output_folder_under_a_file_exits_2_naming_the_key(
    args: list[str],
    key: str,
    a_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(sys, "argv", ["run", *(a.format(file=a_file) for a in args)])
    assert app.main() == 2
    err = _error(capsys)
    assert f"error: config key '{key}': " in err
    assert f"{a_file} is a file, not a folder" in err


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_cli_output_folders_under_a_file_exit_2_naming_the_flag(
    a_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, job = run_in_process([*mini_overrides(tmp_path), "retriever=bm25"], tmp_path)
    evalset = FIXTURE / "evalsets" / "mini.jsonl"
    corpus = FIXTURE / "corpus" / "mini"
    filled = tmp_path / "filled.jsonl"
    filled.write_text("")
    capsys.readouterr()  # the job's own warnings
    commands = [
        (compare_cli.main, [str(job), "--out", f"{a_file}/cmp"]),
        (pool_cli.main, [str(job), "--depth", "3", "--out", f"{a_file}/pool"]),
        (
            pool_cli.main,
            ["--import", str(filled), "--evalset", str(evalset), "--corpus", str(corpus),
             "--out", f"{a_file}/snap/mini.jsonl"],
        ),
    ]
    for main, argv in commands:
        assert main(argv) == 2, argv
        err = _error(capsys)
        assert err.startswith("error: config key '--out': "), err
        assert f"{a_file} is a file, not a folder" in err


# -- job folder names: no path or URL in them -------------------------------------------------
def _schema_keys(node: Any, prefix: str = "") -> Iterator[str]:
    """Every key of the default config: the typed nodes' fields, and the shipped plug-in nodes'
    keyword arguments (`arms.run_file.path`)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(value, dict) and value:
                yield from _schema_keys(value, f"{prefix}{key}.")
            else:
                yield prefix + key
        return
    for f in fields(node):
        value = getattr(node, f.name)
        if (is_dataclass(value) and not isinstance(value, type)) or (
            isinstance(value, dict) and value and f.name in ("arms", "combiners", "stages")
        ):
            yield from _schema_keys(value, f"{prefix}{f.name}.")
        else:
            yield prefix + f.name


# Keys whose value is a file, a folder, a model folder or a URL, beside those the names say.
PATH_VALUED = {"dataset.corpus", "dataset.evalset", "cache_dir"}
NOT_A_PATH = {"arms.service.results_path"}  # a dotted path into the service's JSON answer


def test_no_path_or_url_key_names_a_sweeps_job_folder() -> None:
    # A sweep's job folder is named by its overrides (hydra.job.override_dirname): a path or a
    # URL in it would nest folders (`http\:/127.0.0.1...`, a folder named `final.run`).
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        hydra = compose(config_name="config", return_hydra_config=True).hydra
    excluded = set(hydra.job.config.override_dirname.exclude_keys)
    path_like = {
        key
        for key in _schema_keys(RunConfig())
        if re.search(r"(path|url|dir|file|model)$", key.rsplit(".", 1)[-1])
    }
    expected = (path_like | PATH_VALUED) - NOT_A_PATH
    assert {"arms.service.url", "arms.run_file.path", "router.rules_file"} <= expected
    assert expected - excluded == set()


# -- relative output paths resolve against the working directory, as Hydra's outputs do ------
@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, str]]:
    """A working directory outside the checkout and a relative name unused in both; whatever
    lands under the checkout by that name is removed (and fails the test)."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    name = f"rel-{tmp_path.name}"
    yield work, name
    leaked = ROOT / name
    if leaked.exists():
        import shutil

        shutil.rmtree(leaked)
        pytest.fail(f"{leaked} was written into the checkout")


def test_outputs_resolve_against_the_working_directory_inputs_may_fall_back(
    elsewhere: tuple[Path, str],
) -> None:
    from retrieval_bench.paths import PROJECT_ROOT, resolve_output, resolve_path

    work, name = elsewhere
    assert resolve_output(f"{name}/x") == work / name / "x"
    assert resolve_output(Path("~") / name) == Path.home() / name
    # An input the working directory lacks: the shipped data, from any folder.
    assert resolve_path("evalsets/travel.jsonl") == PROJECT_ROOT / "evalsets" / "travel.jsonl"


def test_a_relative_cache_dir_is_made_in_the_working_directory(
    elsewhere: tuple[Path, str],
) -> None:
    """run_job makes its cache folder before any work (here the corpus is missing)."""
    from retrieval_bench.errors import BenchError
    from retrieval_bench.job.runner import run_job

    work, name = elsewhere
    cfg = RunConfig(cache_dir=f"{name}/cache")
    cfg.dataset.corpus = str(work / "no-such-corpus")
    cfg.dataset.evalset = str(FIXTURE / "evalsets" / "mini.jsonl")
    with pytest.raises(BenchError):
        run_job(cfg)
    assert (work / name / "cache").is_dir()


@pytest.mark.slow  # a tuning through the app, as a subprocess
def test_a_relative_tune_dir_is_written_in_the_working_directory(
    elsewhere: tuple[Path, str], shared_cache: Path
) -> None:
    from conftest import run_app

    work, name = elsewhere
    args = ["experiment=tune_fusion", "tune.trials=2", "tune.folds=2", f"tune.dir={name}/t",
            f"cache_dir={shared_cache}"]  # fmt: skip
    proc = run_app(args, cwd=work, module="run.tune")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (work / name / "t" / "tune.json").is_file()
    assert f"tuning into {work / name / 't'}" in proc.stdout
