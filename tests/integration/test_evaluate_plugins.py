"""`evaluate()` takes a caller's own stages and combiners as it takes their arms: by name, as
objects, placed and checked as configured ones are, and the result equals the same plug-ins
given as config nodes."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT, compose_config, mini_overrides

from retrieval_bench.api import evaluate
from retrieval_bench.errors import ConfigError

FIXTURES = ROOT / "tests" / "fixtures"
# Two BM25 arms (no model to load), fused.
ARMS = ["retriever.arms=[bm25,bm25_bigram]", "retriever.pool_size=8", "top_k=4"]


@pytest.fixture
def outside(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("outside_stage", "outside_combiner"):
        monkeypatch.syspath_prepend(str(FIXTURES / name))
    yield
    for module in ("doc_dedupe_stage", "borda_fusion"):
        sys.modules.pop(module, None)


def _metrics(result: object) -> str:
    return json.dumps(result.metrics["stages"], sort_keys=True, default=str)  # type: ignore[attr-defined]


@pytest.mark.slow  # whole jobs in process
def test_outside_stages_and_combiners_given_as_objects_run_as_nodes_do(
    outside: None, tmp_path: Path
) -> None:
    from borda_fusion import BordaFusion
    from doc_dedupe_stage import DocDedupeSpec

    base = [*mini_overrides(tmp_path), *ARMS]
    given = evaluate(
        compose_config([*base, "retriever.combine=borda"], check=False),
        stages={"dedupe": DocDedupeSpec(per_doc=1)},
        combiners={"borda": BordaFusion()},
    )
    assert list(given.metrics["stages"]) == ["bm25", "bm25_bigram", "fused", "dedupe", "final"]
    as_nodes = evaluate(
        compose_config(
            [
                *base,
                "+stages.dedupe={_target_: doc_dedupe_stage.DocDedupeSpec, per_doc: 1}",
                "+combiners.borda={_target_: borda_fusion.BordaFusion}",
                "retriever.combine=borda",
            ]
        )
    )
    assert _metrics(given) == _metrics(as_nodes)


def test_an_object_that_is_no_stage_spec_is_refused_naming_it(tmp_path: Path) -> None:
    cfg = compose_config(mini_overrides(tmp_path))
    with pytest.raises(ConfigError) as refused:
        evaluate(cfg, stages={"mine": object()})  # type: ignore[dict-item]
    assert refused.value.key == "stages.mine" and "is not a StageSpec" in refused.value.message
    cfg = compose_config(mini_overrides(tmp_path), check=False)
    cfg.retriever.combine = "mine"
    with pytest.raises(ConfigError, match="unknown combiner 'mine'"):
        evaluate(cfg, combiners={"other": object()})  # type: ignore[dict-item]
