"""Typos never pass silently: unknown config keys (with or without `+`), unknown record fields,
a pool smaller than top_k, a top_k larger than the corpus (issue 9, item 4)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import FIXTURE, ROOT, mini_overrides, run_app
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import DictConfig, OmegaConf

from retrieval_bench.config import RunConfig, nearest_key, register_configs, validate
from retrieval_bench.errors import ConfigError
from retrieval_bench.experiment import run_job

register_configs()


def compose_run(overrides: list[str]) -> DictConfig:
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose(config_name="config", overrides=overrides)


def typed(overrides: list[str]) -> RunConfig:
    return OmegaConf.to_object(compose_run(overrides))  # type: ignore[return-value]


# One misspelt key per config node; `+` (append) and `++` (force-add) both open the node.
APPENDED = [
    ("+retriever.poolsize=5", "retriever.poolsize", "did you mean 'retriever.pool_size'?"),
    ("++retriever.poolsize=5", "retriever.poolsize", "did you mean 'retriever.pool_size'?"),
    ("+top_kk=3", "top_kk", "did you mean 'top_k'?"),
    ("+dataset.splt=dev", "dataset.splt", "did you mean 'dataset.split'?"),
    ("+encoder.modle=x", "encoder.modle", "did you mean 'encoder.model'?"),
    ("+router.default_rout=x", "router.default_rout", "did you mean 'router.default_route'?"),
    ("+bm25.epsiln=0.1", "bm25.epsiln", "did you mean 'bm25.epsilon'?"),
    ("+dense.nprob=3", "dense.nprob", "did you mean 'dense.nprobe'?"),
    ("+text.hm=false", "text.hm", "did you mean 'text.hmm'?"),
    ("+filters.cty=false", "filters.cty", "did you mean 'filters.city'?"),
    ("+scoring.cutof=[3]", "scoring.cutof", "did you mean 'scoring.cutoffs'?"),
    ("+refusal.stage=final", "refusal.stage", "did you mean 'refusal.score_stage'?"),
    ("+compare.alpah=0.1", "compare.alpah", "did you mean 'compare.alpha'?"),
    ("+benchmark.gate.alpah=0.1", "benchmark.gate.alpah", "did you mean 'benchmark.gate.alpha'?"),
    ("+dataset.zzz=1", "dataset.zzz", "the keys here are: name, format, corpus, evalset, path"),
]


@pytest.mark.parametrize(("override", "key", "hint"), APPENDED)
def test_an_appended_unknown_key_is_refused_naming_the_nearest(
    override: str, key: str, hint: str
) -> None:
    cfg = typed([override])
    with pytest.raises(ConfigError) as caught:
        validate(cfg)
    assert caught.value.key == key
    assert str(caught.value).startswith(f"config key '{key}': unknown key; {hint}")


def test_unknown_keys_inside_mappings_and_lists_of_typed_nodes() -> None:
    cfg = typed(["router=rules", "+router.routes.default.stratgy=hybrid"])
    with pytest.raises(
        ConfigError, match=re.escape("did you mean 'router.routes.default.strategy'")
    ):
        validate(cfg)
    cfg = typed(["router=rules", "+router.rules.0.when.min_entitys=1"])
    with pytest.raises(
        ConfigError, match=re.escape("did you mean 'router.rules[0].when.min_entities'")
    ):
        validate(cfg)


def test_an_unknown_key_without_plus_is_refused_by_hydra_and_has_a_nearest_name() -> None:
    with pytest.raises(ConfigCompositionException, match=re.escape("retriever.poolsize")):
        compose_run(["retriever.poolsize=5"])
    assert nearest_key("retriever.poolsize") == "retriever.pool_size"
    assert nearest_key("benchmark.gate.alpah") == "benchmark.gate.alpha"
    assert nearest_key("retriever.zzzzzz") is None
    assert nearest_key("benchmark.gate.tolerances.recall@K") is None  # a free-form mapping


def test_shipped_configs_and_presets_validate() -> None:
    for overrides in (
        [],
        ["retriever=bm25"],
        ["retriever=dense"],
        ["router=rules"],
        ["dataset=policy"],
        ["experiment=monthly"],
        ["experiment=topk_ablation", "top_k=8"],  # the sweep's largest top_k
    ):
        validate(typed(overrides))


def test_a_pool_smaller_than_top_k_is_refused() -> None:
    with pytest.raises(ConfigError) as caught:
        validate(typed(["retriever.pool_size=2", "top_k=6"]))
    assert caught.value.key == "retriever.pool_size"
    assert "2 is smaller than top_k=6" in str(caught.value)
    validate(typed(["retriever.pool_size=6", "top_k=6"]))


def test_top_k_larger_than_the_corpus_is_refused_at_load(tmp_path: Path) -> None:
    overrides = [*mini_overrides(tmp_path), "retriever=bm25", "top_k=13", "retriever.pool_size=13"]
    cfg = typed(overrides)
    validate(cfg)
    with pytest.raises(ConfigError) as caught:
        run_job(cfg)
    assert caught.value.key == "top_k"
    assert "13 is larger than the corpus of dataset 'mini' (12 passages)" in str(caught.value)
    assert len((FIXTURE / "corpus" / "mini" / "passages.jsonl").read_text().splitlines()) == 12


@pytest.mark.slow
def test_app_exits_2_on_an_appended_typo(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = run_app([*mini_overrides(tmp_path), "+retriever.poolsize=5", f"hydra.run.dir={run_dir}"])
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "config key 'retriever.poolsize': unknown key; did you mean 'retriever.pool_size'?" in (
        proc.stderr
    )
    assert not (run_dir / "metrics.json").exists()
