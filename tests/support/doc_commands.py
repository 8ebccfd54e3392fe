"""Every shell command in a fenced block of the README and of the docs site runs as written, so
neither can drift: the machinery the tests that run them share (`tests/app/test_readme_commands.py`
for README.md, `tests/docs/test_commands.py` for docs/, one test class per page so the two
workers share them).

The commands are read from the pages at collection time, so a command added later is run
without touching a test. What counts as a command, per fenced block's language:

* ``bash``: every line (a ``\\``-continued line is one command), run by bash as written;
* ``cron``: each schedule line's command part (after the five time fields), run by ``sh``;
* ``yaml`` that is a GitHub workflow (has ``jobs``): each step's ``run:``; other YAML is a config
  file's contents (``tests/unit/routing/test_router.py`` checks the router example's);
* ``python``: the whole block is one program, run by this interpreter (``python -c``);
* ``json``, ``text`` and ``toml``: data, not commands.

A block of any language whose fence has ``<!-- docs-check: file PATH -->`` on the line before it
is a file the reader is asked to write: its body is written to PATH (relative to the repository
root) when the page's commands reach it, and not run. A worked example's module and YAML are
written so, and the commands after them run what was written.

A block in any other language fails the page's classification test, so a new kind of block is
decided here rather than skipped.

Each page's commands run in order (a later one may use an earlier one's output) in one fresh
copy of the repository per page (`Workspaces`): its own ``outputs/`` (so the default
``cache_dir``, the sweep and benchmark folders all start empty and are shared by the page's
commands, as they would be on a fresh checkout), ``python`` and ``.venv/bin/python`` both this
interpreter, and the copy's ``src`` first on ``PYTHONPATH``. That interpreter starts forked from
one that has imported the app already (``support/forkserver.py``: same argv, environment,
directory and streams, about a second less per command, ``benchmarks/bench_forkserver.py``);
``RETRIEVAL_BENCH_FRESH_PYTHON=1`` makes every ``python`` a fresh one again. ``../shared`` is
linked beside the copy when it exists.

Placeholders are written ``<NAME>`` in a page, each explained in a sentence on that page, and
filled here: see ``PLACEHOLDERS``. Excluded commands are listed, with why, in ``EXCLUDED``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from conftest import ROOT, SHARED_BENCHMARKS

from support.datasets import beir_sample
from support.forkserver import forked_python, shim_script

# Commands the pages show that the tests do not run, and why.
EXCLUDED = {
    "make test": "runs the whole test suite, this test included; CI (.ci/run) runs it",
    "make docs": "builds the site, which tests/docs/test_site_build.py does with the same mkdocs",
    "git fetch origin benchmark-history:benchmark-history && git worktree add outputs/benchmarks "
    "benchmark-history || git worktree add --orphan -b benchmark-history outputs/benchmarks": (
        "the monthly workflow's step that checks its history branch out: it needs the "
        "repository's remote (tests never touch the network) and a git checkout (the test's copy "
        "has no .git)"
    ),
    "cd outputs/benchmarks && git add -A && (git diff --cached --quiet || git -c "
    "user.name=monthly-benchmark -c user.email=monthly-benchmark@users.noreply.github.com commit "
    '-q -m "benchmark $(date -u +%Y-%m)") && git push origin benchmark-history': (
        "the monthly workflow's step that pushes the month to its history branch: a remote"
    ),
    "python -m venv .venv && .venv/bin/pip install -e .": (
        "installs from the network (tests never touch it); .ci/run's `make test` creates the "
        "virtualenv and installs the package on a clean clone"
    ),
    "python -m venv .venv && .venv/bin/pip install -e '.[tracking]'": (
        "installs from the network (tests never touch it); .ci/run's `make test` creates the "
        "virtualenv and installs the package, its test extra holding the tracking extra, on a "
        "clean clone"
    ),
}

# The exit code each command is documented to end with; every other command must exit 0.
EXPECTED_EXIT: dict[str, int] = {}

PLACEHOLDER = re.compile(r"<([A-Z][A-Z0-9_]*)>")
APP = re.compile(r"-m run(?=\s|$)")  # `python -m run ...`, not `-m run.compare`
# A command that loads a FlagEmbedding model (BGE-M3, m3, a reranker, the judge, the tiny models).
MODEL_COMMAND = re.compile(r"BGE_M3|RERANKER|bge|m3|rerank|judge|FlagEmbedding", re.IGNORECASE)
SHELL_BLOCKS = {"bash": "bash", "cron": "sh", "python": "python"}
DATA_BLOCKS = {"json", "text", "toml"}
# On the line before a fence: the block is a file to write at PATH, not a command.
FILE_MARKER = re.compile(r"^<!-- docs-check: file (?P<path>[\w./-]+) -->$")
WRITE_FILE = "file"  # DocCommand.shell of such a block


@dataclass(frozen=True)
class DocCommand:
    page: str  # the page it is written in, relative to the repository (README.md, docs/...)
    line: int  # where it is written in the page
    text: str  # as written (a cron line: its command part; a file block: its content)
    shell: str  # the program that runs it (WRITE_FILE: a file block, written to `path`)
    path: str = ""  # a file block's path, relative to the repository root

    @property
    def code(self) -> str:
        """The command without its trailing comment."""
        if self.shell == WRITE_FILE:
            return f"write {self.path}"
        return re.sub(r"(^|\s)#.*$", "", self.text).strip()

    @property
    def id(self) -> str:
        return f"{self.page}:L{self.line}:{self.code}"

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def fenced_blocks(markdown: str, page: str) -> Iterator[tuple[int, str, list[str]]]:
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
        assert end < len(lines), f"{page}:{i + 1}: code block never closed"
        yield body_start + 1, opening.group(1), lines[body_start:end]
        i = end + 1


def commands_of_block(
    page: str, first_line: int, language: str, body: list[str]
) -> list[DocCommand]:
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
                commands.append(DocCommand(page, start, text, "bash"))
        return commands
    if language == "python":
        return [DocCommand(page, first_line, "\n".join(body), "python")]
    if language == "cron":
        return [
            DocCommand(page, first_line + offset, raw.split(maxsplit=5)[5], "sh")
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
        return [
            DocCommand(page, _line_of(page, body, first_line, run), run, "bash") for run in runs
        ]
    return []


def _line_of(page: str, body: list[str], first_line: int, run: str) -> int:
    for offset, raw in enumerate(body):
        if re.match(r"^\s*-?\s*run:\s*", raw) and raw.split("run:", 1)[1].strip() == run:
            return first_line + offset
    raise AssertionError(f"{page}: workflow step `run: {run}` not found line by line")


def commands_of(page: Path) -> list[DocCommand]:
    """Every command of a page (README.md, or a docs/ page), in order."""
    name = page.relative_to(ROOT).as_posix()
    text = page.read_text(encoding="utf-8")
    lines = text.splitlines()
    commands: list[DocCommand] = []
    for first_line, language, body in fenced_blocks(text, name):
        marker = FILE_MARKER.match(lines[first_line - 3].strip()) if first_line >= 3 else None
        if marker:
            path = marker["path"]
            assert not path.startswith("/") and ".." not in path.split("/"), (
                f"{name}:{first_line - 2}: a file block's path must lie inside the repository"
            )
            commands.append(DocCommand(name, first_line, "\n".join(body) + "\n", WRITE_FILE, path))
        else:
            commands += commands_of_block(name, first_line, language, body)
    return commands


def docs_pages(section: str | None = None) -> list[Path]:
    """The docs pages of one section's folder (`how-to`), or (None) every page of the site, in
    path order; the hooks' folder holds no pages."""
    docs = ROOT / "docs"
    return sorted((docs / section).rglob("*.md") if section else docs.rglob("*.md"))


def runnable(commands: list[DocCommand]) -> list[DocCommand]:
    return [cmd for cmd in commands if cmd.code not in EXCLUDED]


def check_blocks_classified(page: Path) -> None:
    name = page.relative_to(ROOT).as_posix()
    for first_line, language, _ in fenced_blocks(page.read_text(encoding="utf-8"), name):
        assert language in {*SHELL_BLOCKS, "yaml", *DATA_BLOCKS}, (
            f"{name}:{first_line - 1}: a ```{language} block: decide in "
            "tests/support/doc_commands.py whether its lines are commands"
        )


def check_placeholders_explained(page: Path) -> None:
    """Every placeholder a page's commands use has a filler here, and a sentence of the page
    says what to put there (the placeholder appears outside the commands)."""
    text = page.read_text(encoding="utf-8")
    commands = commands_of(page)
    for cmd in runnable(commands):
        for name in PLACEHOLDER.findall(cmd.text):
            assert name in PLACEHOLDERS, f"{cmd.where}: <{name}> has no filler here"
            assert text.count(f"<{name}>") > sum(c.text.count(f"<{name}>") for c in commands), (
                f"{cmd.page}: no sentence says what <{name}> is"
            )


# --------------------------------------------------------------------------------------------
# the workspace: a fresh copy of the repository
# --------------------------------------------------------------------------------------------

_NOT_COPIED = shutil.ignore_patterns(
    ".git", ".venv", "outputs", "__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache",
    ".cache", "*.egg-info", "site",
)  # fmt: skip


@dataclass
class Workspace:
    """One fresh copy of the repository, where one page's commands run in order."""

    repo: Path
    env: dict[str, str]
    tmp: Path
    bge_m3_dir: Path | None = None
    service_url: str | None = None
    judge_url: str | None = None
    servers: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)


@contextlib.contextmanager
def workspace(tmp: Path, preload: tuple[str, ...] = ("FlagEmbedding",)) -> Iterator[Workspace]:
    """A fresh copy of the repository under `tmp`, with its `python` (forked from one that
    imported `preload` too); the services its commands started are stopped when it closes."""
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
    server = forked_python(env, repo, preload=list(preload))
    shim_text = shim_script(ws.servers.enter_context(server))
    for shim in (shim_dir / "python", venv_bin / "python"):
        shim.write_text(shim_text)
        shim.chmod(0o755)
    try:
        yield ws
    finally:
        ws.servers.close()  # the services the commands talked to


class Workspaces:
    """One workspace per page, made when the page's first command runs; the previous page's is
    closed then (its services stopped), as pages run one after another."""

    def __init__(self, tmp_path_factory: Any) -> None:
        self.factory = tmp_path_factory
        self.page: str | None = None
        self.current: Workspace | None = None
        self.stack = contextlib.ExitStack()

    def for_page(self, cmd: DocCommand) -> Workspace:
        page = cmd.page
        if page != self.page or self.current is None:
            self.stack.close()
            self.stack = contextlib.ExitStack()
            tmp = self.factory.mktemp(re.sub(r"\W+", "-", page).strip("-")[-40:])
            # FlagEmbedding (torch, transformers: ~8 s) is imported before the fork only for a
            # page whose commands load a model.
            text = " ".join(c.text for c in commands_of(ROOT / page))
            preload = ("FlagEmbedding",) if MODEL_COMMAND.search(text) else ()
            self.current = self.stack.enter_context(workspace(tmp, preload))
            self.page = page
        return self.current

    def close(self) -> None:
        self.stack.close()


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
    """The newest sweep folder an earlier command of the page wrote (it holds comparison.md)."""
    sweeps = sorted(
        (ws.repo / "outputs" / "multirun").rglob("comparison.md"),
        key=lambda p: p.stat().st_mtime_ns,
    )
    assert sweeps, "<SWEEP_DIR> is used before any command of the page ran a sweep"
    return str(sweeps[-1].parent.relative_to(ws.repo))


def _beir_sample_dir(name: str) -> Callable[[Workspace], str]:
    """A BEIR placeholder (<BEIR_DIR>, <CMRC_DIR>): a BEIR folder of 200 passages of
    ../shared/benchmarks/<name> with the first 50 test queries that judge them (the shipped
    travel set in BEIR layout where it is absent), built once: the command runs as written, in
    seconds rather than the minutes of encoding the whole set (the pages give those times)."""

    def folder(ws: Workspace) -> str:
        shared = ws.tmp / "shared" / "benchmarks" / name
        source = shared if shared.is_dir() else None
        target = ws.tmp / "beir" / (name if source else f"travel-as-{name}")
        if not target.is_dir():
            beir_sample(target, source)
        return os.path.relpath(target, ws.repo)

    return folder


def _filled_pool(ws: Workspace) -> str:
    """The newest pool.jsonl an earlier command of the page wrote, graded as an annotator would:
    each query's best-ranked passage relevant, the others not."""
    pools = sorted((ws.repo / "outputs").rglob("pool.jsonl"), key=lambda p: p.stat().st_mtime_ns)
    assert pools, "<FILLED_POOL> is used before any command of the page wrote a pool"
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
    """The label snapshot an earlier command of the page imported (evalsets/<name>.<hash>.jsonl)."""
    snapshots = sorted((ws.repo / "evalsets").glob("*.*.jsonl"), key=lambda p: p.stat().st_mtime_ns)
    assert snapshots, "<SNAPSHOT> is used before any command of the page imported a pool"
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


def _compared_folder(command: str, ws: Workspace) -> str:
    """The folder `python -m run.compare DIR ...` writes its comparison to: its `--out`, or its
    first folder argument (the sweep folder a page names, or the one <SWEEP_DIR> stood for)."""
    words = shlex.split(command)
    after = words[words.index("run.compare") + 1 :]
    if "--out" in after:
        return after[after.index("--out") + 1]
    folders = [w for w in after if not w.startswith("-") and (ws.repo / w).is_dir()]
    return folders[0] if folders else fill("<SWEEP_DIR>", ws)


def run_command(cmd: DocCommand, ws: Workspace) -> None:
    """Run one command of a page in its workspace and check what it wrote."""
    if cmd.shell == WRITE_FILE:  # a file the page asks the reader to write
        target = ws.repo / cmd.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(cmd.text, encoding="utf-8")
        return
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
        f"{cmd.where}: `{command}` exited {done.returncode}, expected {expected}\n"
        f"--- stdout\n{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-4000:]}"
    )
    after = _files(outputs) if outputs.is_dir() else {}
    written = [p for p, mtime in after.items() if before.get(p) != mtime]
    new_jobs = [p.parent for p in written if p.name == "metrics.json"]
    for job in new_jobs:
        _check_job(job)

    if "run.compare" in command:
        sweep = ws.repo / _compared_folder(command, ws)
        assert sweep / "comparison.md" in written, f"run.compare wrote no {sweep}/comparison.md"
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


def page_classes(pages: list[Path]) -> dict[str, type]:
    """One test class per page that has commands (`TestCommandsOf_<page>`), for a section's
    module to put in its namespace: pytest-xdist's `loadscope` hands out each class on its own,
    so a section's pages are shared by the workers, while each page's commands run in order in
    the page's own fresh copy (a class-scoped workspace)."""
    import pytest

    classes: dict[str, type] = {}
    for page in pages:
        commands = runnable(commands_of(page))
        if not commands:
            continue

        def workspaces(cls: type, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspaces]:
            spaces = Workspaces(tmp_path_factory)
            yield spaces
            spaces.close()

        @pytest.mark.slow
        @pytest.mark.parametrize("cmd", commands, ids=[cmd.id for cmd in commands])
        def test_command_runs(self: Any, cmd: DocCommand, workspaces: Workspaces) -> None:
            run_command(cmd, workspaces.for_page(cmd))

        name = "TestCommandsOf_" + re.sub(r"\W+", "_", page.relative_to(ROOT / "docs").as_posix())
        classes[name] = type(
            name,
            (),
            {
                "__doc__": f"The commands of {page.relative_to(ROOT).as_posix()}, in order.",
                "workspaces": pytest.fixture(scope="class")(classmethod(workspaces)),
                "test_command_runs": test_command_runs,
            },
        )
    return classes
