"""A stage, a combiner and an encoder from outside the package, each one module and one YAML
file under tests/fixtures (the arm's is test_open_pipeline's): each runs in a job, is recorded,
exported and scored like a built-in, and a bad node is refused naming its key."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, compose_config, run_in_process

from retrieval_bench.errors import ConfigError

FIXTURES = ROOT / "tests" / "fixtures"


def searchpath(name: str) -> str:
    return f"hydra.searchpath=[file://{FIXTURES / name / 'conf'}]"


@pytest.fixture
def outside(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("outside_stage", "outside_combiner", "outside_encoder"):
        monkeypatch.syspath_prepend(str(FIXTURES / name))
    yield
    for module in ("doc_dedupe_stage", "borda_fusion", "hashed_ngrams"):
        sys.modules.pop(module, None)


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_an_outside_stage_runs_in_its_place_and_is_recorded(outside: None, tmp_path: Path) -> None:
    result, job = run_in_process(
        [searchpath("outside_stage"), "experiment=doc_dedupe", "retriever=bm25"], tmp_path
    )
    assert list(result.metrics["stages"]) == ["bm25", "dedupe", "final"]
    doc_of = {p.id: p.doc_id or p.id for p in result.dataset.passages}
    for record in result.records:
        kept = record.stages["dedupe"].ids
        # The bm25 pool in order, each document's first passage only.
        first_of_each: dict[str, str] = {}
        for pid in record.stages["bm25"].ids:
            first_of_each.setdefault(doc_of[pid], pid)
        assert kept == list(first_of_each.values())
        assert record.stages["final"].ids == kept[: result.metrics["cutoffs"][0]]
    manifest = json.loads((job / "manifest.json").read_text())
    assert manifest["stages"]["dedupe"]["kind"] == "doc_dedupe"
    assert (job / "trec" / "dedupe.run").is_file()
    assert "dedupe" in result.metrics["stage_loss"]["checkpoints"]


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_an_outside_stage_placed_after_the_cut_is_refused(outside: None) -> None:
    with pytest.raises(ConfigError) as refused:
        compose_config(
            [searchpath("outside_stage"), "experiment=doc_dedupe", "stages.dedupe.after=final"]
        )
    assert refused.value.key == "stages.dedupe.after"
    assert "runs before the top_k cut" in str(refused.value)
    # The old spelling of the order says the same, by the same key.
    with pytest.raises(ConfigError) as refused:
        compose_config(
            [searchpath("outside_stage"), "experiment=doc_dedupe", "pipeline=[final,dedupe]"]
        )
    assert refused.value.key == "stages.dedupe.after"
    with pytest.raises(ConfigError, match=r"'stages.dedupe.per_dok': unknown key; did you mean"):
        compose_config(
            [searchpath("outside_stage"), "experiment=doc_dedupe", "+stages.dedupe.per_dok=2"]
        )
    with pytest.raises(ConfigError, match=r"'stages.dedup': unknown stage 'dedup'; did you mean"):
        compose_config(
            [searchpath("outside_stage"), "experiment=doc_dedupe", "pipeline=[rerank,dedup,final]"]
        )
    with pytest.raises(ConfigError, match=r"'stages.dedupe.after': unknown stage 'rerenk'"):
        compose_config(
            [searchpath("outside_stage"), "experiment=doc_dedupe", "stages.dedupe.after=rerenk"]
        )


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_an_outside_combiner_fuses_by_its_own_formula(outside: None, tmp_path: Path) -> None:
    result, job = run_in_process(
        [searchpath("outside_combiner"), "retriever=borda_hybrid"], tmp_path
    )
    assert list(result.metrics["stages"]) == ["bm25", "dense", "fused", "final"]
    record = result.records[0]
    expected: dict[str, float] = {}
    for arm in ("bm25", "dense"):
        ids = record.stages[arm].ids
        for rank, pid in enumerate(ids):
            expected[pid] = expected.get(pid, 0.0) + (len(ids) - rank) / len(ids)
    fused = record.stages["fused"]
    assert dict(zip(fused.ids, fused.scores, strict=True)) == pytest.approx(expected, abs=1e-12)
    assert (job / "trec" / "fused.run").is_file()


def test_an_outside_combiner_that_does_not_exist_gets_the_nearest_class(outside: None) -> None:
    with pytest.raises(ConfigError) as refused:
        compose_config(
            [
                searchpath("outside_combiner"),
                "retriever=borda_hybrid",
                "combiners.borda._target_=borda_fusion.BordaFusin",
            ]
        )
    assert refused.value.key == "combiners.borda._target_"
    assert "did you mean 'borda_fusion.BordaFusion'" in str(refused.value)


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_an_outside_encoder_is_the_dense_arm(outside: None, tmp_path: Path) -> None:
    from hashed_ngrams import HashedNgramEncoder

    result, job = run_in_process(
        [searchpath("outside_encoder"), "retriever=dense", "encoder=hashed_ngrams"], tmp_path
    )
    record = result.records[0]
    encoder = HashedNgramEncoder(
        compose_config([searchpath("outside_encoder"), "encoder=hashed_ngrams"]).encoder
    )
    texts = {p.id: (f"{p.title}\n{p.text}" if p.title else p.text) for p in result.dataset.passages}
    query = encoder.encode_queries([record.query.query])[0]
    dense = record.stages["dense"]
    for pid, got in zip(dense.ids, dense.scores, strict=True):
        want = float(np.dot(encoder.encode_passages([texts[pid]])[0], query))
        assert got == pytest.approx(want, abs=1e-5)
    manifest = json.loads((job / "manifest.json").read_text())
    assert manifest["config"]["encoder"]["_target_"] == "hashed_ngrams.HashedNgramEncoder"
