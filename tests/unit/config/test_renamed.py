"""Old key spellings (issue 36 moved every setting to one home): each is rewritten to its new
home, announced once, and composes to the very config its new spelling does; the reference page
is the mapping's own text."""

from __future__ import annotations

import logging
from dataclasses import asdict
from pathlib import Path

import pytest
from conftest import ROOT, compose_config
from hydra.errors import HydraException
from omegaconf import OmegaConf

from retrieval_bench.config.compose import compose_dict
from retrieval_bench.config.renamed import (
    RENAMES,
    Notice,
    rename_key,
    renamed_keys_page,
    rewrite_overrides,
)
from retrieval_bench.errors import ConfigError
from run.exits import bad_input_message

# Each old spelling with the new one it must compose exactly as.
SAME_CONFIG = [
    (["bm25.k1=1.2"], ["arms.bm25.k1=1.2"]),
    (["bm25.b=0.3", "bm25.impl=rank_bm25"], ["arms.bm25.b=0.3", "arms.bm25.impl=rank_bm25"]),
    (["retriever.rrf_k=20"], ["combiners.rrf.k=20"]),
    (
        ["retriever.combine=score", "retriever.normalize=zscore", "retriever.method=combmnz"],
        [
            "retriever.combine=score",
            "combiners.score.normalize=zscore",
            "combiners.score.method=combmnz",
        ],
    ),
    (["dense.index=HNSW16", "dense.nprobe=4"], ["arms.dense.index=HNSW16", "arms.dense.nprobe=4"]),
    (["m3.model=/m3", "m3.weights=[1,0,0]"], ["arms.m3.model=/m3", "arms.m3.weights=[1,0,0]"]),
    (["run_file.path=a.run"], ["arms.run_file.path=a.run"]),
    (
        ["service.url=http://127.0.0.1:9/s", "service.retries=0"],
        ["arms.service.url=http://127.0.0.1:9/s", "arms.service.retries=0"],
    ),
    (
        ["reranker=cross_encoder", "reranker.model=m", "reranker.depth=8"],
        ["reranker=cross_encoder", "stages.rerank.model=m", "stages.rerank.depth=8"],
    ),
    (
        ["reranker.kind=cross_encoder", "reranker.model=m"],
        ["reranker=cross_encoder", "stages.rerank.model=m"],
    ),
    (
        ["context.budget_chars=300", "context.max_per_doc=2"],
        ["stages.context.budget_chars=300", "stages.context.max_per_doc=2"],
    ),
    (["compare.baseline={top_k:6}"], ["compare.baselines=[{top_k:6}]"]),
    (["compare.baseline=bm25"], ["compare.baselines=[bm25]"]),
]


@pytest.mark.parametrize(("old", "new"), SAME_CONFIG)
def test_an_old_spelling_composes_to_its_new_spellings_config(
    old: list[str], new: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="retrieval_bench.config.renamed"):
        composed = compose_config(old)
    assert asdict(composed) == asdict(compose_config(new))
    # One notice line per old key, naming the new one.
    renamed = [key for key in (o.split("=")[0] for o in old) if rename_key(key)]
    assert [r.getMessage() for r in caplog.records] == [
        f"renamed key: {key} -> {rename_key(key)} (the old spelling is read for this release)"
        for key in renamed
    ]


def test_the_shipped_variants_follow_the_base_arm_as_they_did_the_global_node() -> None:
    cfg = compose_config(["bm25.k1=0.9"])
    arms = ("bm25", "bm25_nohmm", "bm25_nolexicon", "bm25_bigram")
    assert [cfg.arms[arm]["k1"] for arm in arms] == [0.9] * 4
    assert compose_config(["retriever.rrf_k=7"]).combiners["fill"]["k"] == 7


def test_an_arm_the_command_line_adds_follows_an_old_nodes_key_it_does_not_set() -> None:
    """`m3.model=DIR` set the model of every BGE-M3 arm, the one the same command line adds
    included; that arm now follows `arms.m3.model`, unless it names its own."""
    m3 = "retrieval_bench.retrievers.m3.M3Spec"
    given = [
        "m3.model=/models/m3",
        f"+arms.m3_lex={{_target_: {m3}, mode: all, weights: [0.2, 0.6, 0.2]}}",
        f"+arms.mine={{_target_: {m3}, mode: dense, model: /models/other}}",
        "+arms.flat={_target_: retrieval_bench.retrievers.bm25.BM25ArmSpec, b: 0.0}",
    ]
    out, _ = rewrite_overrides(given)
    assert out == ["arms.m3.model=/models/m3", *given[1:], "++arms.m3_lex.model=${arms.m3.model}"]
    cfg = compose_config([*given, "retriever.arms=[bm25]"])
    assert cfg.arms["m3_lex"]["model"] == "/models/m3"
    assert cfg.arms["mine"]["model"] == "/models/other"
    assert "model" not in cfg.arms["flat"]


@pytest.mark.parametrize(
    ("pipeline", "order"),
    [
        ("[rerank,final,context]", ["rerank", "final", "context"]),
        ("[final]", ["final"]),
        ("[rerank,final]", ["rerank", "final"]),
    ],
)
def test_an_old_pipeline_runs_the_stages_it_listed_in_its_order(
    pipeline: str, order: list[str]
) -> None:
    """`pipeline` said which stages run and in what order: each listed stage is placed after the
    one before it, each shipped stage it leaves out is removed."""
    from retrieval_bench.job.build import stage_specs

    cfg = compose_config([f"pipeline={pipeline}"])
    assert [name for name, _ in stage_specs(cfg)] == order


def test_rewriting_keeps_prefixes_sweeps_and_what_was_not_renamed() -> None:
    given = [
        "+bm25.k1=1",
        "++bm25.b=0.5",
        "~bm25.epsilon",
        "bm25.k1=0.5,1.5",
        "reranker=cross_encoder",  # a config group, not a key
        "hydra.run.dir=x",
        "top_k=8",
        "retriever=bm25",
    ]
    out, notices = rewrite_overrides(given)
    assert out == [
        "+arms.bm25.k1=1",
        "++arms.bm25.b=0.5",
        "~arms.bm25.epsilon",
        "arms.bm25.k1=0.5,1.5",
        "reranker=cross_encoder",
        "hydra.run.dir=x",
        "top_k=8",
        "retriever=bm25",
    ]
    # One notice per old key, however often it is met.
    assert notices == [
        Notice("bm25.k1", "arms.bm25.k1"),
        Notice("bm25.b", "arms.bm25.b"),
        Notice("bm25.epsilon", "arms.bm25.epsilon"),
    ]
    assert rewrite_overrides(out) == (out, [])  # the new spelling passes unchanged


def test_a_single_baseline_becomes_a_list_of_one_and_its_sweep_is_refused() -> None:
    assert rewrite_overrides(["compare.baseline=top_k=6"])[0] == ["compare.baselines=[top_k=6]"]
    with pytest.raises(ConfigError, match=r"compare\.baselines=") as error:
        rewrite_overrides(["compare.baseline=a,b"])
    assert error.value.key == "compare.baseline"


def test_every_rename_lands_on_a_key_of_the_default_config() -> None:
    composed = compose_dict([])
    groups = {"reranker"}  # a config group's choice, not a key
    for rename in RENAMES:
        assert (
            OmegaConf.select(composed, rename.new, default=None) is not None
            or rename.new in groups
        ), rename


def test_the_reference_page_is_the_mapping() -> None:
    page = ROOT / "docs" / "reference" / "renamed-keys.md"
    assert page.read_text(encoding="utf-8") == renamed_keys_page(), (
        "docs/reference/renamed-keys.md differs from config.renamed.renamed_keys_page(): "
        "regenerate it from the mapping"
    )


def test_a_config_files_old_key_is_refused_naming_its_new_home(tmp_path: Path) -> None:
    """A YAML file is not rewritten: its old key fails (exit 2) with the key's new home and
    the file to write it in, not Hydra's bare `Key 'bm25' not in 'RunConfig'`."""
    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "old.yaml").write_text(
        "# @package _global_\nretriever:\n  rrf_k: 30\n", encoding="utf-8"
    )
    with pytest.raises(HydraException) as caught:
        compose_dict(["experiment=old", f"hydra.searchpath=[file://{tmp_path}]"])
    assert bad_input_message(caught.value) == (
        "config key 'retriever.rrf_k': renamed 'combiners.rrf.k' in this release; an old "
        "spelling is read on the command line only, so write 'combiners.rrf.k' in "
        "experiment/old.yaml (docs/reference/renamed-keys.md)"
    )
