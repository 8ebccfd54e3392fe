"""`retriever=m3` through the app (in-process): its stage is recorded and scored, its fused
scores are the weighted sums of the three single arms' scores, and a second job reads every
output from the cache. The model is the tiny random BGE-M3 built by the test."""

from __future__ import annotations

import json
from importlib import import_module
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURE, mini_overrides, run_in_process
from support.random_models import TINY, build_random_bge_m3

from retrieval_bench.data.jsonl import read_jsonl
from retrieval_bench.errors import EncoderUnavailable
from retrieval_bench.retrievers.m3 import clear_m3_memo

pytestmark = pytest.mark.slow
PASSAGES = FIXTURE / "corpus" / "mini" / "passages.jsonl"
EVALSET = FIXTURE / "evalsets" / "mini.jsonl"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random BGE-M3 whose tokenizer is trained on the mini corpus and its queries, so
    passages and queries share tokens (the sparse arm has something to match)."""
    import_module("FlagEmbedding")
    texts = [json.loads(line)["text"] for line in PASSAGES.read_text("utf-8").splitlines()]
    texts += [json.loads(line)["query"] for line in EVALSET.read_text("utf-8").splitlines()]
    target = tmp_path_factory.mktemp("tiny-bge-m3")
    build_random_bge_m3(target, TINY, texts, tokenizer_vocab=400)
    return target


@pytest.fixture(autouse=True)
def fresh_memo() -> None:
    """Each test starts as a new process would: no corpus outputs held in memory."""
    clear_m3_memo()


def _overrides(tmp_path: Path, model_dir: Path, *more: str) -> list[str]:
    model = [f"arms.m3.model={model_dir}", "arms.m3.max_length=128"]
    return [*mini_overrides(tmp_path), *model, *more]


def test_retriever_m3_runs_and_reads_the_cache_the_second_time(
    model_dir: Path, tmp_path: Path
) -> None:
    result, job = run_in_process(_overrides(tmp_path, model_dir, "retriever=m3"), tmp_path)
    manifest = json.loads((job / "manifest.json").read_text())
    assert manifest["embeddings"] == {
        "m3_passages": {"encoded": 12, "cached": 0},
        "m3_queries": {"encoded": 9, "cached": 0},
    }
    assert manifest["arms"]["m3"]["weights"] == {"dense": 0.4, "sparse": 0.2, "colbert": 0.4}
    assert (job / "trec" / "m3.run").is_file()
    metrics = json.loads((job / "metrics.json").read_text())
    assert metrics["stages"]["m3"]["counts"]["scored"] > 0

    # The cache entries are plain arrays: they load with pickles refused.
    entries = sorted((tmp_path / "cache" / "m3").rglob("*.npz"))
    assert len(entries) == 2
    for entry in entries:
        with np.load(entry, allow_pickle=False) as data:
            assert data["dense"].shape[0] in (12, 9)

    clear_m3_memo()  # as a new process would: only the disk cache is left
    again, job2 = run_in_process(_overrides(tmp_path, model_dir, "retriever=m3"), tmp_path / "2")
    assert json.loads((job2 / "manifest.json").read_text())["embeddings"] == {
        "m3_passages": {"encoded": 0, "cached": 12},
        "m3_queries": {"encoded": 0, "cached": 9},
    }
    first = [r.stages["m3"].ids for r in result.records]
    assert [r.stages["m3"].ids for r in again.records] == first


def test_m3_scores_are_the_weighted_sum_of_the_three_arms(model_dir: Path, tmp_path: Path) -> None:
    """One job with all four arms over the whole corpus (pool_size 12 = every passage): for each
    passage the m3 arm ranks, its score is (0.5 dense + 0.2 sparse + 0.3 colbert) / 1.0 of the
    single arms' scores (sparse 0 where the sparse arm did not retrieve it)."""
    _, job = run_in_process(
        _overrides(
            tmp_path,
            model_dir,
            "retriever.arms=[m3_dense,m3_sparse,m3_colbert,m3]",
            "retriever.pool_size=12",
            "arms.m3.weights=[0.5,0.2,0.3]",
        ),
        tmp_path,
    )
    manifest = json.loads((job / "manifest.json").read_text())
    assert manifest["embeddings"]["m3_passages"]["encoded"] == 12  # one encode for four arms
    sparse_hits = 0
    for _, record in read_jsonl(job / "rankings.jsonl"):
        stages = record["stages"]
        single = {
            arm: dict(zip(stages[arm]["ids"], stages[arm]["scores"], strict=True))
            for arm in ("m3_dense", "m3_sparse", "m3_colbert")
        }
        sparse_hits += len(single["m3_sparse"])
        for pid, score in zip(stages["m3"]["ids"], stages["m3"]["scores"], strict=True):
            expected = (
                0.5 * single["m3_dense"][pid]
                + 0.2 * single["m3_sparse"].get(pid, 0.0)
                + 0.3 * single["m3_colbert"][pid]
            )
            assert score == pytest.approx(expected, abs=1e-6)
        assert sorted(stages["m3"]["ids"]) == sorted(single["m3_dense"])
    assert sparse_hits > 0


def test_a_missing_model_fails_before_any_arm_is_built(tmp_path: Path) -> None:
    missing = tmp_path / "no-bge-m3"
    with pytest.raises(EncoderUnavailable, match=r"Set arms\.m3\.model=/local/path/to/no-bge-m3"):
        run_in_process(
            [*mini_overrides(tmp_path), f"arms.m3.model={missing}", "retriever.arms=[bm25,m3]"],
            tmp_path,
        )
    assert not (tmp_path / "cache" / "tokens").exists() or not any(
        (tmp_path / "cache" / "tokens").rglob("*.npz")
    )  # the BM25 arm tokenised nothing: the m3 arm's check ran first
