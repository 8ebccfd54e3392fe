"""`python -m run router=learned` on the shipped travel set, as a user runs it: exit 0 with the
held-out table on the console and the router saved; a saved router applied to another job; a
bad setting or a saved router that does not fit exits 2 naming it; `run.tune` refuses it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_app

pytestmark = pytest.mark.slow  # the app as a subprocess, whole jobs

# Ridge alone, one margin: the job's own work, not the model search, is what this checks.
FAST = ["router=learned", "~router.estimators.forest", "router.margins=[0.0]"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("learned-app")
    out = tmp / "travel"
    done = run_app([*FAST, f"hydra.run.dir={out}", f"cache_dir={tmp / 'cache'}"])
    assert done.returncode == 0, done.stderr[-2000:]
    assert "learned router:" in done.stdout and "captured" in done.stdout
    assert "Goal (>= 25% of the gap captured" in done.stdout
    return out


def test_a_learned_job_saves_its_router_and_reports_the_held_out_table(trained: Path) -> None:
    saved = json.loads((trained / "router.json").read_text(encoding="utf-8"))
    assert saved["trained_on"]["dataset"] == "travel" and saved["trained_on"]["queries"] == 147
    metrics = json.loads((trained / "metrics.json").read_text(encoding="utf-8"))
    table = metrics["learned_router"]["table"]
    assert table["overall"]["n"] == 147 and "negation" in table["by_type"]
    report = (trained / "report.md").read_text(encoding="utf-8")
    assert "## Learned router" in report and "### What it learned" in report


def test_a_saved_router_applies_to_another_job_and_a_misfit_exits_2(
    trained: Path, tmp_path: Path
) -> None:
    model = trained / "router.json"
    cache = f"cache_dir={tmp_path / 'cache'}"
    applied = run_app(
        ["dataset=policy", *FAST, f"router.model={model}", f"hydra.run.dir={tmp_path / 'p'}", cache]
    )
    assert applied.returncode == 0, applied.stderr[-2000:]
    assert "none of this job's labelled queries was in its training set" in applied.stdout
    misfit = run_app(
        [*FAST, f"router.model={model}", "router.mode=soft", f"hydra.run.dir={tmp_path / 's'}",
         cache]
    )  # fmt: skip
    assert misfit.returncode == 2
    assert (
        "config key 'router.model'" in misfit.stderr and "trained for another job" in misfit.stderr
    )


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("router.candidates=[bm25,hybird]", "config key 'router.candidates[1]': unknown strategy"),
        ("router.model=no/such/router.json", "config key 'router.model': no such file"),
        ("+router.estimators.tree=[3]", "config key 'router.estimators.tree': unknown model"),
        ("router.metric=recall_pooled@K", "config key 'router.metric'"),
    ],
)
def test_a_bad_learned_router_setting_exits_2_naming_its_key(
    override: str, message: str, tmp_path: Path
) -> None:
    done = run_app([*FAST, override, f"hydra.run.dir={tmp_path}", f"cache_dir={tmp_path / 'c'}"])
    assert done.returncode == 2, done.stderr[-2000:]
    assert message in done.stderr


def test_run_tune_refuses_a_learned_router(tmp_path: Path) -> None:
    done = run_app(
        ["router=learned", f"tune.dir={tmp_path}", "combiners.rrf.k=range(10,20)"],
        module="run.tune",
    )
    assert done.returncode == 2
    assert "router=learned chooses its own settings inside its training folds" in done.stderr
