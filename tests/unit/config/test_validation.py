"""Config typos never pass silently: unknown keys (with or without `+`) and a misspelt key in a
router rules file are refused naming the nearest key; a pool smaller than top_k and a top_k
larger than the corpus are refused naming the key. (Record fields: tests/unit/data/
test_record_fields.py; empty rankings: tests/integration/test_empty_rankings.py.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import (
    FIXTURE,
    compose_config,
    mini_overrides,
    run_app,
)
from hydra.errors import ConfigCompositionException

from retrieval_bench.config import RunConfig, nearest_key
from retrieval_bench.errors import ConfigError, DataError
from retrieval_bench.job.check import check_config
from retrieval_bench.job.runner import run_job


def typed(overrides: list[str]) -> RunConfig:
    """The composed config before validation: each test validates it itself."""
    return compose_config(overrides, check=False)


# One misspelt key per config node; `+` (append) and `++` (force-add) both open the node.
APPENDED = [
    ("+retriever.poolsize=5", "retriever.poolsize", "did you mean 'retriever.pool_size'?"),
    ("++retriever.poolsize=5", "retriever.poolsize", "did you mean 'retriever.pool_size'?"),
    ("+top_kk=3", "top_kk", "did you mean 'top_k'?"),
    ("+dataset.splt=dev", "dataset.splt", "did you mean 'dataset.split'?"),
    ("+encoder.modle=x", "encoder.modle", "did you mean 'encoder.model'?"),
    ("+router.default_rout=x", "router.default_rout", "did you mean 'router.default_route'?"),
    ("+arms.bm25.epsiln=0.1", "arms.bm25.epsiln", "did you mean 'epsilon'?"),
    ("+combiners.rrf.kk=3", "combiners.rrf.kk", "did you mean 'k'?"),
    ("+arms.dense.nprob=3", "arms.dense.nprob", "did you mean 'nprobe'?"),
    ("+text.hm=false", "text.hm", "did you mean 'text.hmm'?"),
    ("+filters.cty=false", "filters.cty", "did you mean 'filters.city'?"),
    ("+scoring.cutof=[3]", "scoring.cutof", "did you mean 'scoring.cutoffs'?"),
    ("+refusal.stage=final", "refusal.stage", "did you mean 'refusal.score_stage'?"),
    ("+compare.alpah=0.1", "compare.alpah", "did you mean 'compare.alpha'?"),
    ("+benchmark.gate.alpah=0.1", "benchmark.gate.alpah", "did you mean 'benchmark.gate.alpha'?"),
    ("+dataset.zzz=1", "dataset.zzz", "known: name, format, corpus, evalset, path"),
]


@pytest.mark.parametrize(("override", "key", "hint"), APPENDED)
def test_an_appended_unknown_key_is_refused_naming_the_nearest(
    override: str, key: str, hint: str
) -> None:
    cfg = typed([override])
    with pytest.raises(ConfigError) as caught:
        check_config(cfg)
    assert caught.value.key == key
    assert str(caught.value).startswith(f"config key '{key}': unknown key; {hint}")


def test_unknown_keys_inside_mappings_and_lists_of_typed_nodes() -> None:
    cfg = typed(["router=rules", "+router.routes.default.stratgy=hybrid"])
    with pytest.raises(
        ConfigError, match=re.escape("did you mean 'router.routes.default.strategy'")
    ):
        check_config(cfg)
    cfg = typed(["router=rules", "+router.rules.0.when.min_entitys=1"])
    with pytest.raises(
        ConfigError, match=re.escape("did you mean 'router.rules[0].when.min_entities'")
    ):
        check_config(cfg)


def test_an_unknown_key_without_plus_is_refused_by_hydra_and_has_a_nearest_name() -> None:
    with pytest.raises(ConfigCompositionException, match=re.escape("retriever.poolsize")):
        typed(["retriever.poolsize=5"])
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
        check_config(typed(overrides))


def test_a_pool_smaller_than_top_k_is_refused() -> None:
    with pytest.raises(ConfigError) as caught:
        check_config(typed(["retriever.pool_size=2", "top_k=6"]))
    assert caught.value.key == "retriever.pool_size"
    assert "2 is smaller than top_k=6" in str(caught.value)
    check_config(typed(["retriever.pool_size=6", "top_k=6"]))


def test_top_k_larger_than_the_corpus_is_refused_at_load(tmp_path: Path) -> None:
    overrides = [*mini_overrides(tmp_path), "retriever=bm25", "top_k=13", "retriever.pool_size=13"]
    cfg = typed(overrides)
    check_config(cfg)
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


def test_a_misspelt_key_in_a_router_rules_file_names_the_nearest(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("routes:\n  default: {stratgy: hybrid}\n", encoding="utf-8")
    cfg = typed(["router=rules", f"router.rules_file={rules}"])
    with pytest.raises(DataError) as caught:
        check_config(cfg)
    assert str(caught.value) == (
        f"{rules}: routes.default.stratgy: Key 'stratgy' not in 'RouteConfig'; "
        "did you mean 'routes.default.strategy'?"
    )
