"""The README of before issue 36 (frozen as tests/fixtures/readme_before_config_homes.md) keeps
working: each of its commands whose keys moved runs with its old spelling, as written there, and
with the new one, on the mini fixture; both give the same metrics, and the old spelling prints
exactly one notice line per old key, naming its new home. A handful of commands covers every
family of `config.renamed.RENAMES` (the families the old README never used, such as `pipeline`
and `compare.baseline`, with a command of their own); a test checks that coverage.

Single jobs run in process (`run_in_process`: the app's composition and job, notices through
logging); the sweeps run as the app (`run_app`), where the notices are the process's stderr."""

from __future__ import annotations

import json
import logging
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import FIXTURE, ROOT, mini_overrides, run_app, run_in_process
from support.doc_commands import commands_of

from retrieval_bench.config.renamed import RENAMES, rename_key

README = ROOT / "tests" / "fixtures" / "readme_before_config_homes.md"
MINI_EVALSET = FIXTURE / "evalsets" / "mini.jsonl"
M3_LEX = "{_target_:retrieval_bench.retrievers.m3.M3Spec,mode:all,weights:[0.2,0.6,0.2]}"


@dataclass(frozen=True)
class Case:
    """An old command line (`python -m run ...`: from the frozen README when `in_readme`) and
    the same command in the new spelling. Placeholders in either are filled per test."""

    old: str
    new: str
    in_readme: bool = True

    @property
    def id(self) -> str:
        return " ".join(self.old.split()[3:])[:60]


# Single jobs, each old spelling as the frozen README writes it.
JOBS = [
    Case(
        "python -m run retriever.rrf_k=20 retriever.pool_size=20",
        "python -m run combiners.rrf.k=20 retriever.pool_size=20",
    ),
    Case(
        "python -m run retriever.combine=score retriever.normalize=minmax "
        "'retriever.weights=[0.3,0.7]'",
        "python -m run retriever.combine=score combiners.score.normalize=minmax "
        "'retriever.weights=[0.3,0.7]'",
    ),
    Case("python -m run bm25.impl=rank_bm25", "python -m run arms.bm25.impl=rank_bm25"),
    Case(
        "python -m run retriever=dense 'dense.index=\"IVF4,Flat\"' dense.nprobe=2",
        "python -m run retriever=dense 'arms.dense.index=\"IVF4,Flat\"' arms.dense.nprobe=2",
    ),
    Case(
        "python -m run retriever=m3 m3.model=<BGE_M3_DIR> 'retriever.arms=[m3,m3_lex]' "
        f"'+arms.m3_lex={M3_LEX}'",
        # The arm the command adds named no model: it followed the old global node's; in the
        # new spelling each arm names its own.
        "python -m run retriever=m3 arms.m3.model=<BGE_M3_DIR> 'retriever.arms=[m3,m3_lex]' "
        f"'+arms.m3_lex={M3_LEX[:-1]},model:<BGE_M3_DIR>}}'",
    ),
    Case(
        "python -m run reranker=cross_encoder reranker.model=outputs/tiny-reranker "
        "reranker.depth=10",
        "python -m run reranker=cross_encoder stages.rerank.model=outputs/tiny-reranker "
        "stages.rerank.depth=10",
    ),
    Case(
        "python -m run context.budget_chars=300 context.max_per_doc=2",
        "python -m run stages.context.budget_chars=300 stages.context.max_per_doc=2",
    ),
    Case(
        "python -m run retriever=service service.url=<SERVICE_URL>",
        "python -m run retriever=service arms.service.url=<SERVICE_URL>",
    ),
    Case(
        "python -m run retriever=run_file run_file.path=outputs/bm25-travel/trec/final.run",
        "python -m run retriever=run_file arms.run_file.path=outputs/bm25-travel/trec/final.run",
    ),
    # Families the old README never wrote: a command each.
    Case(
        "python -m run retriever.combine=score retriever.method=combmnz",
        "python -m run retriever.combine=score combiners.score.method=combmnz",
        in_readme=False,
    ),
    Case(
        "python -m run reranker.kind=cross_encoder reranker.model=outputs/tiny-reranker",
        "python -m run reranker=cross_encoder stages.rerank.model=outputs/tiny-reranker",
        in_readme=False,
    ),
    Case(
        "python -m run 'pipeline=[final]'",
        "python -m run '~stages.rerank' '~stages.context'",
        in_readme=False,
    ),
]
# Sweeps, run as the app: their comparison reads compare.baseline(s).
SWEEPS = [
    Case(
        "python -m run -m retriever=bm25,hybrid bm25.k1=0.5,1.5 'compare.baselines=[bm25,1.5]'",
        "python -m run -m retriever=bm25,hybrid arms.bm25.k1=0.5,1.5 "
        "'compare.baselines=[bm25,1.5]'",
    ),
    Case(
        "python -m run -m retriever=bm25 bm25.k1=0.5,1.5 compare.baseline=1.5",
        "python -m run -m retriever=bm25 arms.bm25.k1=0.5,1.5 'compare.baselines=[1.5]'",
        in_readme=False,
    ),
]


def overrides(command: str) -> list[str]:
    """A command line's arguments: what follows `python -m run` (a sweep's `-m` included)."""
    words = shlex.split(command, comments=True)
    assert words[:3] == ["python", "-m", "run"], command
    return words[3:]


def old_keys(command: str) -> list[str]:
    """The old keys a command line names, in order, each once."""
    keys = [w.lstrip("+~").split("=")[0] for w in overrides(command) if w != "-m"]
    return list(dict.fromkeys(k for k in keys if rename_key(k)))


def notice(key: str) -> str:
    new = "stages.<name>.after" if key == "pipeline" else rename_key(key)
    return f"renamed key: {key} -> {new} (the old spelling is read for this release)"


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """What the commands' placeholders and the README's own paths stand for here: tiny random
    models, a service on 127.0.0.1 answering the mini queries, a BM25 job's run file."""
    from support.random_models import build_random_bge_m3, build_random_cross_encoder
    from support.service_server import labelled_answers, serve

    tmp = tmp_path_factory.mktemp("readme-before")
    (tmp / "m3").mkdir()
    build_random_bge_m3(tmp / "m3")
    (tmp / "reranker").mkdir()
    build_random_cross_encoder(tmp / "reranker")
    _, bm25_job = run_in_process([*mini_overrides(tmp), "retriever=bm25"], tmp / "bm25")
    with serve(labelled_answers(MINI_EVALSET)) as (url, _):
        yield {
            "<BGE_M3_DIR>": str(tmp / "m3"),
            "outputs/tiny-reranker": str(tmp / "reranker"),
            "<SERVICE_URL>": url,
            "outputs/bm25-travel/trec/final.run": str(bm25_job / "trec" / "final.run"),
        }


def filled(command: str, places: dict[str, str]) -> str:
    for name, value in places.items():
        command = command.replace(name, value)
    return command


def test_the_old_commands_are_the_frozen_readmes_and_cover_every_renamed_family() -> None:
    written = {c.code for c in commands_of(README)}
    cases = JOBS + SWEEPS
    assert [c.old for c in cases if c.in_readme and c.old not in written] == []
    assert [c.old for c in cases if not c.in_readme and c.old in written] == []
    met = {key for c in cases for key in old_keys(c.old)}
    families = {r.old for r in RENAMES}
    covered = {r.old for r in RENAMES if any(r.match(key) is not None for key in met)}
    assert covered == families
    # No new spelling names an old key.
    assert [c.new for c in cases if old_keys(c.new)] == []


@pytest.mark.slow  # whole jobs in process, tiny models loaded
@pytest.mark.parametrize("case", JOBS, ids=[c.id for c in JOBS])
def test_an_old_readme_job_runs_as_its_new_spelling(
    case: Case,
    places: dict[str, str],
    shared_cache: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The session's embedding cache: the mini fixture encoded once for every job here.
    data = [*mini_overrides(tmp_path)[:-1], f"cache_dir={shared_cache}"]
    with caplog.at_level(logging.WARNING, logger="retrieval_bench.config.renamed"):
        old, _ = run_in_process([*data, *overrides(filled(case.old, places))], tmp_path / "old")
    said = [r.getMessage() for r in caplog.records if r.name == "retrieval_bench.config.renamed"]
    assert said == [notice(key) for key in old_keys(case.old)]
    caplog.clear()
    new, _ = run_in_process([*data, *overrides(filled(case.new, places))], tmp_path / "new")
    assert [r for r in caplog.records if r.name == "retrieval_bench.config.renamed"] == []
    assert old.metrics["stages"] == new.metrics["stages"]
    assert old.metrics["stages"]["final"]["counts"]["scored"] > 0


def _sweep(command: str, folder: Path, tmp: Path) -> tuple[list[str], dict[str, object]]:
    """The notice lines a sweep printed and what it measured: each job's metrics, and its
    comparison (the verdicts), less what differs between any two runs (timings, memory, the
    jobs' folders)."""
    proc = run_app([*overrides(command), *mini_overrides(tmp), f"hydra.sweep.dir={folder}"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    notices = [line for line in proc.stderr.splitlines() if line.startswith("renamed key: ")]
    jobs = {
        metrics.parent.name: json.loads(metrics.read_text(encoding="utf-8"))["stages"]
        for metrics in sorted(folder.glob("*/metrics.json"))
    }
    comparison = json.loads((folder / "comparison.json").read_text(encoding="utf-8"))
    for dataset in comparison["datasets"].values():
        del dataset["cost"]
        for configuration in dataset["configurations"]:
            del configuration["path"]
    return notices, {"jobs": jobs, "comparison": comparison}


@pytest.mark.slow  # starts the app for a sweep in each spelling
@pytest.mark.parametrize("case", SWEEPS, ids=[c.id for c in SWEEPS])
def test_an_old_sweep_runs_and_compares_as_its_new_spelling(case: Case, tmp_path: Path) -> None:
    notices, old = _sweep(case.old, tmp_path / "old", tmp_path)
    assert notices == [notice(key) for key in old_keys(case.old)]
    notices, new = _sweep(case.new, tmp_path / "new", tmp_path)
    assert notices == []
    assert len(old["jobs"]) >= 2 and old["jobs"] == new["jobs"]  # type: ignore[arg-type]
    assert old["comparison"] == new["comparison"]
    assert old["comparison"]["datasets"]["mini"]["ablations"]  # type: ignore[index]
