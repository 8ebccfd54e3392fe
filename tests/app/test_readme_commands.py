"""Every command in README.md's code blocks runs as written, so the README cannot drift.

The commands are read from the README at collection time, so a command added later is run
without touching this file. What counts as a command, per fenced block's language:

* ``bash``: every line (a ``\\``-continued line is one command), run by bash as written;
* ``cron``: each schedule line's command part (after the five time fields), run by ``sh``;
* ``yaml`` that is a GitHub workflow (has ``jobs``): each step's ``run:``; other YAML is a config
  file's contents (``tests/unit/routing/test_router.py`` checks the router example's);
* ``python``: the whole block is one program, run by this interpreter (``python -c``);
* ``json`` and ``text``: data, not commands.

A block in any other language fails ``test_every_code_block_is_classified``, so a new kind of
block is decided here rather than skipped.

Each command runs in order (a later one may use an earlier one's output) in one fresh copy of
the repository: its own ``outputs/`` (so the default ``cache_dir``, the sweep and benchmark
folders all start empty and are shared by the commands, as they would be on a fresh checkout),
``python`` and ``.venv/bin/python`` both this interpreter, and the copy's ``src`` first on
``PYTHONPATH``. That interpreter starts forked from one that has imported the app already
(``support/forkserver.py``: same argv, environment, directory and streams, about a second
less per command, ``benchmarks/bench_forkserver.py``); ``RETRIEVAL_BENCH_FRESH_PYTHON=1``
makes every ``python`` a fresh one again. ``../shared`` is linked beside the copy when it
exists.

Placeholders are written ``<NAME>`` in the README, each explained in a sentence there, and
filled here: see ``PLACEHOLDERS``. Excluded commands are listed, with why, in ``EXCLUDED``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, SHARED_BENCHMARKS
from support.datasets import beir_sample
from support.forkserver import forked_python, shim_script

README = ROOT / "README.md"

# Commands the README shows that this test does not run, and why.
EXCLUDED = {
    "make test": "runs the whole test suite, this test included; CI (.ci/run) runs it",
    "python -m venv .venv && .venv/bin/pip install -e .": (
        "installs from the network (tests never touch it); .ci/run's `make test` creates the "
        "virtualenv and installs the package on a clean clone"
    ),
}

# The exit code each command is documented to end with; every other command must exit 0.
EXPECTED_EXIT: dict[str, int] = {}

PLACEHOLDER = re.compile(r"<([A-Z][A-Z0-9_]*)>")
APP = re.compile(r"-m run(?=\s|$)")  # `python -m run ...`, not `-m run.compare`
SHELL_BLOCKS = {"bash": "bash", "cron": "sh", "python": "python"}
DATA_BLOCKS = {"json", "text"}


@dataclass(frozen=True)
class ReadmeCommand:
    line: int  # where it is written in README.md
    text: str  # as written (a cron line: its command part)
    shell: str  # the program that runs it

    @property
    def code(self) -> str:
        """The command without its trailing comment."""
        return re.sub(r"(^|\s)#.*$", "", self.text).strip()

    @property
    def id(self) -> str:
        return f"L{self.line}:{self.code}"


def fenced_blocks(markdown: str) -> Iterator[tuple[int, str, list[str]]]:
    """(line of the first body line, language, body lines) of every fenced block."""
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        opening = re.match(r"^```(\S*)\s*$", lines[i])
        if not opening:
            i += 1
            continue
        body_start = i + 1
        end = body_start
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        assert end < len(lines), f"README.md:{i + 1}: code block never closed"
        yield body_start + 1, opening.group(1), lines[body_start:end]
        i = end + 1


def commands_of_block(first_line: int, language: str, body: list[str]) -> list[ReadmeCommand]:
    if language == "bash":
        commands, pending, start = [], "", first_line
        for offset, raw in enumerate(body):
            if not pending:
                start = first_line + offset
            if raw.endswith("\\"):
                pending += raw[:-1] + " "
                continue
            text = (pending + raw).strip()
            pending = ""
            if text and not text.startswith("#"):
                commands.append(ReadmeCommand(start, text, "bash"))
        return commands
    if language == "python":
        return [ReadmeCommand(first_line, "\n".join(body), "python")]
    if language == "cron":
        return [
            ReadmeCommand(first_line + offset, raw.split(maxsplit=5)[5], "sh")
            for offset, raw in enumerate(body)
            if raw.strip() and not raw.lstrip().startswith("#")
        ]
    if language == "yaml":
        document = yaml.safe_load("\n".join(body))
        if not (isinstance(document, dict) and "jobs" in document):
            return []  # a config file's contents, not a workflow
        runs = [
            step["run"]
            for job in document["jobs"].values()
            for step in job.get("steps", [])
            if "run" in step
        ]
        return [ReadmeCommand(_line_of(body, first_line, run), run, "bash") for run in runs]
    return []


def _line_of(body: list[str], first_line: int, run: str) -> int:
    for offset, raw in enumerate(body):
        if re.match(r"^\s*-?\s*run:\s*", raw) and raw.split("run:", 1)[1].strip() == run:
            return first_line + offset
    raise AssertionError(f"README.md: workflow step `run: {run}` not found line by line")


def readme_commands() -> list[ReadmeCommand]:
    text = README.read_text(encoding="utf-8")
    return [cmd for block in fenced_blocks(text) for cmd in commands_of_block(*block)]


COMMANDS = readme_commands()
RUNNABLE = [cmd for cmd in COMMANDS if cmd.code not in EXCLUDED]


def test_every_code_block_is_classified() -> None:
    for first_line, language, _ in fenced_blocks(README.read_text(encoding="utf-8")):
        assert language in {*SHELL_BLOCKS, "yaml", *DATA_BLOCKS}, (
            f"README.md:{first_line - 1}: a ```{language} block: decide in "
            f"{Path(__file__).name} whether its lines are commands"
        )


def test_exclusions_name_readme_commands() -> None:
    """An exclusion whose command left the README is stale: remove it."""
    written = {cmd.code for cmd in COMMANDS}
    assert set(EXCLUDED) <= written, set(EXCLUDED) - written


def test_every_placeholder_has_a_filler_and_is_explained() -> None:
    readme = README.read_text(encoding="utf-8")
    for cmd in RUNNABLE:
        for name in PLACEHOLDER.findall(cmd.text):
            assert name in PLACEHOLDERS, f"README.md:{cmd.line}: <{name}> has no filler here"
            # The prose says what to put there (the placeholder appears outside the command).
            assert readme.count(f"<{name}>") > sum(c.text.count(f"<{name}>") for c in COMMANDS), (
                f"README.md: no sentence says what <{name}> is"
            )


# --------------------------------------------------------------------------------------------
# the workspace: a fresh copy of the repository
# --------------------------------------------------------------------------------------------

_NOT_COPIED = shutil.ignore_patterns(
    ".git", ".venv", "outputs", "__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache",
    ".cache", "*.egg-info",
)  # fmt: skip


@dataclass
class Workspace:
    repo: Path
    env: dict[str, str]
    tmp: Path
    bge_m3_dir: Path | None = None
    service_url: str | None = None
    judge_url: str | None = None
    servers: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    tmp = tmp_path_factory.mktemp("readme")
    repo = tmp / "retrieval-bench"
    shutil.copytree(ROOT, repo, ignore=_NOT_COPIED)
    if SHARED_BENCHMARKS.is_dir():
        (tmp / "shared").symlink_to(SHARED_BENCHMARKS.parent, target_is_directory=True)
    # `python` and `.venv/bin/python` are this interpreter; the Makefile's install stamp is
    # present, so `make demo` runs its job and installs nothing (CI does the install).
    shim_dir = tmp / "bin"
    shim_dir.mkdir()
    venv_bin = repo / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    (repo / ".venv" / ".installed-base").touch()
    env = {
        **os.environ,
        "PATH": f"{shim_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(repo / "src"),
        "PYTHONUNBUFFERED": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    env.pop("HYDRA_FULL_ERROR", None)
    ws = Workspace(repo, env, tmp)
    # Each `python` runs forked from one that imported the app already (support/forkserver.py),
    # and FlagEmbedding: the model-loading commands (BGE-M3, m3, the rerankers, the judge, the
    # tiny models' build) would each import it (torch, transformers: ~8 s) again.
    server = forked_python(env, repo, preload=["FlagEmbedding"])
    shim_text = shim_script(ws.servers.enter_context(server))
    for shim in (shim_dir / "python", venv_bin / "python"):
        shim.write_text(shim_text)
        shim.chmod(0o755)
    yield ws
    ws.servers.close()  # the services README commands talked to


def _tiny_bge_m3(ws: Workspace) -> str:
    """A local BGE-M3-shaped model (tiny, random weights), built once, for <BGE_M3_DIR>."""
    if ws.bge_m3_dir is None:
        from support.random_models import build_random_bge_m3

        ws.bge_m3_dir = ws.tmp / "bge-m3"
        ws.bge_m3_dir.mkdir()
        build_random_bge_m3(ws.bge_m3_dir)
    return str(ws.bge_m3_dir)


def _tiny_reranker(ws: Workspace) -> str:
    """A local cross-encoder reranker (tiny, random weights), built once, for <RERANKER_DIR>."""
    target = ws.tmp / "reranker"
    if not target.is_dir():
        from support.random_models import build_random_cross_encoder

        target.mkdir()
        build_random_cross_encoder(target)
    return str(target)


def _service_url(ws: Workspace) -> str:
    """<SERVICE_URL>: a retriever service on 127.0.0.1, started once for the module, that
    answers each travel query with its labelled passages."""
    if ws.service_url is None:
        from support.service_server import labelled_answers, serve

        ws.service_url, _ = ws.servers.enter_context(serve(labelled_answers()))
    return ws.service_url


def _judge_url(ws: Workspace) -> str:
    """<JUDGE_URL>: a stand-in chat model on 127.0.0.1 (tests/support/judge_server.py, a
    deterministic rule), started once for the module, behind an OpenAI-compatible API's base URL."""
    if ws.judge_url is None:
        from support.judge_server import chat_model

        ws.judge_url, _ = ws.servers.enter_context(chat_model())
    return ws.judge_url


def _latest_sweep(ws: Workspace) -> str:
    """The newest sweep folder an earlier README command wrote (it holds comparison.md)."""
    sweeps = sorted(
        (ws.repo / "outputs" / "multirun").rglob("comparison.md"),
        key=lambda p: p.stat().st_mtime_ns,
    )
    assert sweeps, "<SWEEP_DIR> is used before any README command ran a sweep"
    return str(sweeps[-1].parent.relative_to(ws.repo))


def _beir_sample_dir(name: str) -> Callable[[Workspace], str]:
    """A BEIR placeholder (<BEIR_DIR>, <CMRC_DIR>): a BEIR folder of 200 passages of
    ../shared/benchmarks/<name> with the first 50 test queries that judge them (the mini
    fixture in BEIR layout where it is absent), built once: the command runs as written, in
    seconds rather than the minutes of encoding the whole set (README gives those times)."""

    def folder(ws: Workspace) -> str:
        shared = ws.tmp / "shared" / "benchmarks" / name
        source = shared if shared.is_dir() else None
        target = ws.tmp / "beir" / (name if source else f"mini-{name}")
        if not target.is_dir():
            beir_sample(target, source)
        return os.path.relpath(target, ws.repo)

    return folder


def _filled_pool(ws: Workspace) -> str:
    """The newest pool.jsonl an earlier README command wrote, graded as an annotator would:
    each query's best-ranked passage relevant, the others not."""
    pools = sorted((ws.repo / "outputs").rglob("pool.jsonl"), key=lambda p: p.stat().st_mtime_ns)
    assert pools, "<FILLED_POOL> is used before any README command wrote a pool"
    graded, first = [], set()
    for line in pools[-1].read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        record["grade"] = 0 if record["query_id"] in first else 1
        first.add(record["query_id"])
        graded.append(json.dumps(record, ensure_ascii=False) + "\n")
    filled = ws.tmp / "filled-pool.jsonl"
    filled.write_text("".join(graded), encoding="utf-8")
    return str(filled)


def _snapshot(ws: Workspace) -> str:
    """The label snapshot an earlier README command imported (evalsets/<name>.<hash>.jsonl)."""
    snapshots = sorted((ws.repo / "evalsets").glob("*.*.jsonl"), key=lambda p: p.stat().st_mtime_ns)
    assert snapshots, "<SNAPSHOT> is used before any README command imported a pool"
    return str(snapshots[-1].relative_to(ws.repo))


PLACEHOLDERS: dict[str, Callable[[Workspace], str]] = {
    "SWEEP_DIR": _latest_sweep,
    "FILLED_POOL": _filled_pool,
    "SNAPSHOT": _snapshot,
    "JOB_DIR": _latest_sweep,  # run.rescore takes a job, a sweep or a month folder
    "BGE_M3_DIR": _tiny_bge_m3,
    "RERANKER_DIR": _tiny_reranker,
    "BEIR_DIR": _beir_sample_dir("scifact"),
    "CMRC_DIR": _beir_sample_dir("cmrc2018"),
    "REPO_DIR": lambda ws: str(ws.repo),
    "SERVICE_URL": _service_url,
    "JUDGE_URL": _judge_url,
}


def fill(text: str, ws: Workspace) -> str:
    return PLACEHOLDER.sub(lambda m: PLACEHOLDERS[m.group(1)](ws), text)


# --------------------------------------------------------------------------------------------
# running them
# --------------------------------------------------------------------------------------------


def _files(root: Path) -> dict[Path, int]:
    return {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}


def _check_job(job: Path) -> None:
    """A finished job folder: its files, and metrics at the job's own top_k that scored queries."""
    for name in ("report.md", "manifest.json", "rankings.jsonl", "qrels.trec", "trec/final.run"):
        assert (job / name).is_file(), f"{job}: no {name}"
    top_k = json.loads((job / "manifest.json").read_text(encoding="utf-8"))["config"]["top_k"]
    final = json.loads((job / "metrics.json").read_text(encoding="utf-8"))["stages"]["final"]
    assert final["counts"]["scored"] > 0, job
    assert f"recall@{top_k}" in final["overall"], (job, sorted(final["overall"]))


@pytest.mark.slow
@pytest.mark.parametrize("cmd", RUNNABLE, ids=[cmd.id for cmd in RUNNABLE])
def test_readme_command_runs(cmd: ReadmeCommand, workspace: Workspace) -> None:
    ws = workspace
    command = fill(cmd.text, ws)
    outputs = ws.repo / "outputs"
    before = _files(outputs) if outputs.is_dir() else {}
    done = subprocess.run(
        [cmd.shell, "-c", command],
        cwd=ws.repo,
        env=ws.env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    expected = EXPECTED_EXIT.get(cmd.code, 0)
    assert done.returncode == expected, (
        f"README.md:{cmd.line}: `{command}` exited {done.returncode}, expected {expected}\n"
        f"--- stdout\n{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-4000:]}"
    )
    after = _files(outputs) if outputs.is_dir() else {}
    written = [p for p, mtime in after.items() if before.get(p) != mtime]
    new_jobs = [p.parent for p in written if p.name == "metrics.json"]
    for job in new_jobs:
        _check_job(job)

    if "run.compare" in command:
        sweep = ws.repo / fill("<SWEEP_DIR>", ws)
        assert sweep / "comparison.md" in written, "run.compare wrote no comparison.md"
        assert done.stdout.strip(), "run.compare printed nothing"
    elif "experiment=monthly" in command:
        months = [p.parent for p in after if p.name == "benchmark.json"]
        assert months, "the monthly job wrote no benchmark.json"
        for month in months:
            assert (month / "gate.json").is_file(), f"{month}: no gate.json"
        # The trend is written in the month's root: benchmark.root, outputs/benchmarks unless given.
        root = re.search(r"benchmark\.root=(\S+)", command)
        trend = ws.repo / (root[1] if root else "outputs/benchmarks") / "trend.md"
        assert trend.is_file(), f"no {trend.relative_to(ws.repo)}"
        if "cron.log" in command:
            log = outputs / "benchmarks" / "cron.log"
            assert log.is_file() and log.stat().st_size > 0, "cron.log is empty"
    elif "encoder.shard_only=" in command:  # shard jobs encode into the cache, score nothing
        assert re.search(r"shard \d+ of \d+ \(\d+ passages\): encoded", done.stdout), done.stdout
    elif APP.search(command) or "make demo" in command:
        assert new_jobs, f"`{command}` wrote no job folder (metrics.json) under outputs/"
        if re.search(r"\s(-m|--multirun)\s", APP.split(command, 1)[-1]):
            assert any(p.name == "comparison.md" for p in written), "the sweep wrote no comparison"
    else:  # a command of a kind not known here: it ran, and said something
        assert done.stdout.strip() or done.stderr.strip(), f"`{command}` printed nothing"
