"""Plug-ins found by name through Python entry points (`retrieval_bench.entry_points`): a real
distribution, `rb-outside` (tests/support/outside_dist.py), offers an arm, a combiner, a stage,
an encoder and a measures module under the entry-point groups; a config names each by its
entry-point name where a class path would go, `python -m run.plugins` lists them beside the
built-ins, and an unknown name fails naming the key and the nearest installed name.

The fast tests put the distribution's installed form (package + `*.dist-info`) on `sys.path`,
where `importlib.metadata` finds it as it finds any installed distribution; the slow one builds
the project with pip into a folder and runs the app on it."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import compose_config, mini_overrides, run_app, run_in_process
from support.outside_dist import (
    ENTRY_POINTS,
    MEASURE,
    NAME,
    PACKAGE,
    VERSION,
    write_installed,
    write_project,
)

from retrieval_bench import entry_points
from retrieval_bench.config.encoder import EncoderConfig
from retrieval_bench.encoders import encoder_class
from retrieval_bench.errors import ConfigError
from retrieval_bench.job.build import arm_spec, combiner_spec
from retrieval_bench.scoring import registry
from run.plugins import main as plugins_main

ORIGIN = f"{NAME} {VERSION}"
# Every outside plug-in named by its entry point, in one job: the arm beside BM25, fused by the
# outside combiner, the outside stage before the cut, the dense arm on the outside encoder, and
# the outside measure.
BY_NAME = [
    "+arms.bigram={_target_: char_bigram, min_overlap: 2}",
    "+combiners.b={_target_: borda}",
    "+stages.dedupe={_target_: doc_dedupe, per_doc: 1, after: rerank}",
    "retriever.arms=[bm25,bigram,dense]",
    "retriever.combine=b",
    "encoder._target_=hashed_ngrams",
    "scoring.plugins=[rb_outside_metrics]",
]


def _forget_outside() -> None:
    for module in [m for m in sys.modules if m == PACKAGE or m.startswith(f"{PACKAGE}.")]:
        del sys.modules[module]
    if MEASURE in registry.known_metrics():
        registry.unregister_measure(MEASURE)


@pytest.fixture
def outside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """`rb-outside` installed into a folder on sys.path."""
    site = write_installed(tmp_path / "site")
    monkeypatch.syspath_prepend(str(site))
    yield site
    _forget_outside()


def test_every_kind_is_found_with_its_distribution(outside: Path) -> None:
    found = {(p.kind, p.name): p for p in entry_points.installed()}
    for kind, points in ENTRY_POINTS.items():
        for name, value in points.items():
            assert (found[kind, name].value, found[kind, name].origin) == (value, ORIGIN)
    assert entry_points.names("arms") == ["char_bigram"]


def test_a_config_names_each_kind_by_its_entry_point(outside: Path, tmp_path: Path) -> None:
    from rb_outside.borda_fusion import BordaFusion
    from rb_outside.char_bigram_arm import CharBigramSpec
    from rb_outside.hashed_ngrams import HashedNgramEncoder

    spec = arm_spec("bigram", {"_target_": "char_bigram", "min_overlap": 2})
    assert isinstance(spec, CharBigramSpec) and spec.min_overlap == 2
    assert isinstance(combiner_spec("b", {"_target_": "borda"}), BordaFusion)
    assert encoder_class(EncoderConfig(_target_="hashed_ngrams")) is HashedNgramEncoder
    # The whole config checks as the app checks it: every node instantiated, the measures
    # module loaded (its measure is known), the stage placed before the cut.
    cfg = compose_config([*mini_overrides(tmp_path), *BY_NAME])
    assert cfg.arms["bigram"]["_target_"] == "char_bigram"
    assert MEASURE in registry.known_metrics()


def test_class_paths_still_name_classes(outside: Path) -> None:
    spec = arm_spec("bigram", {"_target_": "rb_outside.char_bigram_arm.CharBigramSpec"})
    assert type(spec).__name__ == "CharBigramSpec"


def test_an_unknown_name_is_refused_naming_the_key_and_the_nearest_name(outside: Path) -> None:
    with pytest.raises(ConfigError) as refused:
        arm_spec("bigram", {"_target_": "char_bigramm"})
    assert refused.value.key == "arms.bigram._target_"
    assert "no installed plug-in named 'char_bigramm' in the entry-point group " in str(
        refused.value
    )
    assert "retrieval_bench.arms (did you mean 'char_bigram'?)" in str(refused.value)
    with pytest.raises(ConfigError, match=r"'encoder._target_': .*did you mean 'hashed_ngrams'"):
        encoder_class(EncoderConfig(_target_="hashed_ngram"))
    with pytest.raises(ConfigError) as refused:
        registry.load_plugins(["rb_outside_metric"], "scoring.plugins")
    assert str(refused.value) == (
        "config key 'scoring.plugins[0]': cannot import 'rb_outside_metric': No module named "
        "'rb_outside_metric'; nor is it the name of an installed measures plug-in (did you mean "
        "'rb_outside_metrics'?)"
    )


def test_a_name_nothing_installs_says_so() -> None:
    with pytest.raises(ConfigError, match=r"retrieval_bench\.stages \(none is installed\)"):
        compose_config(["+stages.dedupe={_target_: doc_dedupe}"])


def test_two_distributions_offering_one_name_are_refused(outside: Path, tmp_path: Path) -> None:
    other = write_installed(
        tmp_path / "other-site",
        "rb-other",
        "[retrieval_bench.arms]\nchar_bigram = rb_outside.char_bigram_arm:CharBigramSpec\n",
    )
    sys.path.insert(0, str(other))
    try:
        with pytest.raises(ConfigError, match=r"\(rb-other 0\.3, rb-outside 0\.3\); name the"):
            arm_spec("bigram", {"_target_": "char_bigram"})
    finally:
        sys.path.remove(str(other))


def test_an_entry_point_that_names_no_class_is_refused(outside: Path, tmp_path: Path) -> None:
    site = write_installed(
        tmp_path / "odd-site", "rb-odd", "[retrieval_bench.arms]\nodd = rb_outside.metrics\n"
    )
    sys.path.insert(0, str(site))
    try:
        with pytest.raises(ConfigError, match=r"'arms.x._target_': the installed plug-in 'odd'"):
            arm_spec("x", {"_target_": "odd"})
    finally:
        sys.path.remove(str(site))


def test_the_list_command_shows_built_ins_and_installed_ones(
    outside: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert plugins_main(["--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    by_key = {(r["kind"], r["name"]): r for r in rows}
    assert by_key["arms", "bm25"]["origin"] == "built in"
    assert by_key["encoders", "use"]["target"] == "retrieval_bench.encoders.use.USEEncoder"
    assert by_key["measures", "ndcg"]["origin"] == "built in"
    for kind, points in ENTRY_POINTS.items():
        for name, value in points.items():
            assert by_key[kind, name] == {
                "kind": kind,
                "name": name,
                "target": value,
                "origin": ORIGIN,
            }
    assert plugins_main(["--kind", "stages"]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0] == "stages (entry-point group retrieval_bench.stages)"
    assert "doc_dedupe" in text and ORIGIN in text and "arms" not in text


@pytest.mark.slow  # a whole job in process
def test_a_job_runs_every_outside_plugin_named_by_its_entry_point(
    outside: Path, tmp_path: Path
) -> None:
    result, job = run_in_process(
        [*mini_overrides(tmp_path), *BY_NAME, "retriever.name=outside"], tmp_path
    )
    assert list(result.metrics["stages"]) == ["bm25", "bigram", "dense", "fused", "dedupe", "final"]
    assert (
        f"{MEASURE}@{result.metrics['cutoffs'][0]}" in result.metrics["stages"]["final"]["overall"]
    )
    manifest = json.loads((job / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["config"]["arms"]["bigram"]["_target_"] == "char_bigram"
    assert manifest["config"]["encoder"]["_target_"] == "hashed_ngrams"
    recorded = {(p["kind"], p["name"]): p for p in manifest["plugins"]}
    assert set(recorded) == {(k, n) for k, points in ENTRY_POINTS.items() for n in points}
    assert {p["origin"] for p in recorded.values()} == {ORIGIN}


@pytest.mark.slow  # pip builds and installs the project; the app runs as a subprocess
def test_a_pip_installed_plugin_package_is_listed_and_run_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = write_project(tmp_path / "project")
    target = tmp_path / "installed"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation"]
    subprocess.run([*pip, "--target", str(target), str(project)], check=True, timeout=300)
    assert (target / f"rb_outside-{VERSION}.dist-info" / "entry_points.txt").is_file()
    monkeypatch.setenv("PYTHONPATH", str(target))

    listed = run_app(["--kind", "arms"], module="run.plugins")
    assert listed.returncode == 0, listed.stderr
    assert any(
        line.split() == ["char_bigram", f"{PACKAGE}.char_bigram_arm:CharBigramSpec", NAME, VERSION]
        for line in listed.stdout.splitlines()
    )
    common = [*mini_overrides(tmp_path), "retriever=bm25", "retriever.arms=[bm25,bigram]"]
    arm = "+arms.bigram={_target_: char_bigram, min_overlap: 2}"
    ran = run_app([*common, arm, f"hydra.run.dir={tmp_path / 'job'}"])
    assert ran.returncode == 0, ran.stderr
    metrics = json.loads((tmp_path / "job" / "metrics.json").read_text(encoding="utf-8"))
    assert "bigram" in metrics["stages"]
    typo = run_app(
        [*common, arm.replace("char_bigram", "char_bigam"), f"hydra.run.dir={tmp_path / 'typo'}"]
    )
    assert typo.returncode == 2
    assert typo.stderr.startswith("error: config key 'arms.bigram._target_': no installed plug-in")
    assert "(did you mean 'char_bigram'?)" in typo.stderr
