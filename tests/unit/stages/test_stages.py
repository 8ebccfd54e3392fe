"""The stages after fusion: the context builder's budget rule, the cross-encoder reranker (a
tiny random model built here, checked against FlagEmbedding's own scores), their config checks,
and the where-was-it-lost count fed from recorded rankings."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, compose_config, mini_overrides
from hydra.errors import HydraException
from support.random_models import build_random_cross_encoder, unloadable_model

from retrieval_bench.config import RunConfig
from retrieval_bench.config.stages import ContextConfig, RerankConfig
from retrieval_bench.errors import ConfigError, EncoderUnavailable
from retrieval_bench.job.build import build_stages, stage_specs
from retrieval_bench.protocols import BuildContext
from retrieval_bench.records import NO_QUERY_TERMS, EvalQuery, Passage, Ranked
from retrieval_bench.scoring.labels import judge
from retrieval_bench.scoring.refusal import choose_stage
from retrieval_bench.scoring.stage_loss import stage_loss
from retrieval_bench.stages.context import OVER_BUDGET, ContextBuilder
from retrieval_bench.stages.rerank import CrossEncoderReranker
from retrieval_bench.tiebreak import TieBreak

# Text lengths 10, 4, 6, 3, 8 (no titles); documents d1 d1 d2 d1 (p4 is its own).
PASSAGES = [
    Passage("p0", "a" * 10, doc_id="d1"),
    Passage("p1", "b" * 4, doc_id="d1"),
    Passage("p2", "c" * 6, doc_id="d2"),
    Passage("p3", "d" * 3, doc_id="d1"),
    Passage("p4", "e" * 8),
]
TEXTS = [p.text for p in PASSAGES]


def _ranked(indices: list[int], requested: int = 5) -> Ranked:
    scores = np.linspace(1.0, 0.5, len(indices)) if indices else np.zeros(0)
    return Ranked(np.asarray(indices, dtype=np.int64), scores, requested)


def _context(cfg: RunConfig, tmp_path: Path) -> BuildContext:
    """A job's context over the passages above, as a stage's check reads it."""
    return BuildContext(PASSAGES, [], cfg, TieBreak([p.id for p in PASSAGES]), tmp_path)


def _query(qid: str = "q", text: str = "北京") -> EvalQuery:
    return EvalQuery(qid, text, "fact", "reviewed", {"p0": 1})


# --------------------------------------------------------------------------------------------
# context
# --------------------------------------------------------------------------------------------


def test_context_skips_what_does_not_fit_and_keeps_walking() -> None:
    builder = ContextBuilder(ContextConfig(budget_chars=13), PASSAGES, TEXTS)
    final = _ranked([4, 0, 1, 2, 3])  # 8, 10, 4, 6, 3 characters
    (context,) = builder.apply([_query()], [final])
    # 8 fits (5 left); 10 skipped; 4 fits (1 left): 1 < shortest passage (3), the walk stops.
    assert context.indices.tolist() == [4, 1]
    assert context.scores.tolist() == [final.scores[0], final.scores[2]]
    assert context.requested == 5
    info = builder.info()
    assert (info["skipped_over_budget"], info["chars_per_query"]) == (1, 12.0)


def test_context_caps_passages_per_document() -> None:
    builder = ContextBuilder(ContextConfig(budget_chars=100, max_per_doc=1), PASSAGES, TEXTS)
    (context,) = builder.apply([_query()], [_ranked([0, 1, 2, 3, 4])])
    # d1 takes p0 only; d2 takes p2; p4 (no doc_id) is its own document.
    assert context.indices.tolist() == [0, 2, 4]
    assert builder.info()["skipped_doc_cap"] == 2


def test_context_empty_says_why() -> None:
    builder = ContextBuilder(ContextConfig(budget_chars=3), PASSAGES, TEXTS)
    empty = Ranked(np.zeros(0, np.int64), np.zeros(0), 5, NO_QUERY_TERMS)
    over, passed_on = builder.apply([_query(), _query("q2")], [_ranked([0, 4]), empty])
    assert (over.returned, over.empty_reason) == (0, OVER_BUDGET)
    assert (passed_on.returned, passed_on.empty_reason) == (0, NO_QUERY_TERMS)


def test_context_budget_below_the_shortest_passage_is_refused() -> None:
    with pytest.raises(ConfigError) as refused:
        ContextBuilder(ContextConfig(budget_chars=2), PASSAGES, TEXTS)
    assert str(refused.value) == (
        "config key 'stages.context.budget_chars': 2 characters is smaller than the corpus's "
        "shortest passage (3 characters): no context could hold a passage; set "
        "stages.context.budget_chars>=3, or 0 for no context stage"
    )


def test_context_budget_refused_at_start_on_the_mini_corpus(tmp_path: Path) -> None:
    """Through the config and the stage specs, as a job does once its corpus is loaded."""
    cfg = compose_config([*mini_overrides(tmp_path), "stages.context.budget_chars=10"])
    from retrieval_bench.data.loader import load_dataset

    dataset = load_dataset(
        "native", "mini", Path(cfg.dataset.corpus), Path(cfg.dataset.evalset), Path(), "test"
    )
    ctx = BuildContext(
        dataset.passages,
        dataset.queries,
        cfg,
        TieBreak([p.id for p in dataset.passages]),
        tmp_path,
    )
    shortest = min(len(t) for t in ctx.texts)
    says = rf"'stages\.context\.budget_chars': 10 .*\({shortest} char"
    with pytest.raises(ConfigError, match=says):
        build_stages([(n, spec) for n, spec in stage_specs(cfg) if spec.active(ctx)], ctx)


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (["stages.context.budget_chars=-1"], "stages.context.budget_chars"),
        (["stages.context.max_per_doc=2"], "stages.context.max_per_doc"),  # the stage is off
        (["reranker=cross_encoder"], "stages.rerank.model"),  # the preset asks for a model
        (["stages.rerank.depth=0"], "stages.rerank.depth"),
        (["stages.rerank.precision=bf16"], "stages.rerank.precision"),
    ],
)
def test_stage_config_refused_naming_the_key(
    tmp_path: Path, overrides: list[str], key: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        compose_config([*mini_overrides(tmp_path), *overrides])
    assert refused.value.key == key


def test_an_unknown_reranker_preset_is_refused_naming_the_options(tmp_path: Path) -> None:
    with pytest.raises(HydraException, match="cross_encoder"):
        compose_config([*mini_overrides(tmp_path), "reranker=colbert"])


def test_a_rerank_model_turns_the_stage_on_with_or_without_the_preset(tmp_path: Path) -> None:
    for given in (["stages.rerank.model=m"], ["reranker=cross_encoder", "stages.rerank.model=m"]):
        cfg = compose_config([*mini_overrides(tmp_path), *given])
        specs = dict(stage_specs(cfg))
        assert specs["rerank"].active(None)  # type: ignore[arg-type]
    assert not dict(stage_specs(compose_config(mini_overrides(tmp_path))))["rerank"].active(
        None  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("depth", "says"),
    [
        (11, "11 is larger than retriever.pool_size=10"),
        (5, "5 is smaller than top_k=6"),
    ],
)
def test_a_rerank_depth_the_job_cannot_give_is_refused_before_any_work(
    tmp_path: Path, depth: int, says: str
) -> None:
    cfg = compose_config(
        [*mini_overrides(tmp_path), "stages.rerank.model=m", f"stages.rerank.depth={depth}"]
    )
    spec = dict(stage_specs(cfg))["rerank"]
    with pytest.raises(ConfigError) as refused:
        spec.check("rerank", _context(cfg, tmp_path))  # type: ignore[attr-defined]
    assert refused.value.key == "stages.rerank.depth" and says in refused.value.message


def test_rerank_depth_follows_the_pool_and_is_bounded_by_it(tmp_path: Path) -> None:
    given = ["reranker=cross_encoder", "stages.rerank.model=m"]
    cfg = compose_config([*mini_overrides(tmp_path), *given])
    assert cfg.stages["rerank"]["depth"] == cfg.retriever.pool_size == 10
    cfg = compose_config(
        [*mini_overrides(tmp_path), "stages.rerank.model=m", "retriever.pool_size=8"]
    )
    assert cfg.stages["rerank"]["depth"] == 8
    spec = dict(stage_specs(cfg))["rerank"]
    with pytest.raises(ConfigError) as refused:
        spec.check_for_job(7, 6, "stages.rerank.")  # type: ignore[attr-defined]
    assert str(refused.value) == (
        "config key 'stages.rerank.depth': 8 is larger than retriever.pool_size=7: the pool the "
        "reranker reads holds at most 7 passages per arm; set stages.rerank.depth<=7 or raise "
        "retriever.pool_size"
    )


def test_stage_config_imports_nothing_heavy() -> None:
    code = (
        "import sys, retrieval_bench.config.stages, retrieval_bench.stages; "
        "print(sorted(m for m in ('torch', 'FlagEmbedding', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "[]"


# --------------------------------------------------------------------------------------------
# rerank: a tiny random cross-encoder
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_reranker(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("tiny-reranker")
    build_random_cross_encoder(target)
    return target


@pytest.mark.slow  # a (tiny) cross-encoder: torch and FlagEmbedding
def test_rerank_scores_are_flag_rerankers_in_tie_break_order(tiny_reranker: Path) -> None:
    from FlagEmbedding import FlagReranker

    cfg = RerankConfig(model=str(tiny_reranker), depth=3, batch_size=4)
    texts = ["北京是中国的首都", "上海的交通非常方便。", "我喜欢吃苹果和香蕉。", "股市大跌。"]
    reranker = CrossEncoderReranker(cfg, texts, TieBreak(["a", "b", "c", "d"]))
    queries = [_query("q1", "北京"), _query("q2", "上海交通")]
    fused = [_ranked([3, 2, 1, 0]), _ranked([0, 1])]
    out = reranker.apply(queries, fused)
    # The reference: FlagEmbedding on the same pairs in one call (only the top depth=3).
    pairs = [("北京", texts[i]) for i in (3, 2, 1)] + [("上海交通", texts[i]) for i in (0, 1)]
    reference = FlagReranker(str(tiny_reranker), devices=["cpu"], batch_size=4)
    expected = np.asarray(reference.compute_score(pairs, batch_size=4, max_length=512))
    heads = [[3, 2, 1], [0, 1]]
    for ranked, head, scores in zip(out, heads, [expected[:3], expected[3:]], strict=True):
        order = sorted(range(len(head)), key=lambda j: (-scores[j], -head[j]))
        assert ranked.indices.tolist() == [head[j] for j in order]
        assert ranked.scores.tolist() == [float(scores[j]) for j in order]
        assert ranked.requested == 3
    assert reranker.info()["pairs_scored"] == 5


@pytest.mark.parametrize(
    ("config", "tokenizer", "limit"),
    [
        ({"model_type": "xlm-roberta", "max_position_embeddings": 130, "pad_token_id": 1}, {}, 128),
        ({"model_type": "bert", "max_position_embeddings": 512}, {"model_max_length": 10**30}, 512),
        ({"model_type": "xlm-roberta", "max_position_embeddings": 8194, "pad_token_id": 1},
         {"model_max_length": 512}, 512),
        ({}, {}, None),
    ],
)  # fmt: skip
def test_a_models_token_limit_is_read_from_its_files(
    tmp_path: Path, config: dict[str, object], tokenizer: dict[str, object], limit: int | None
) -> None:
    import json

    from retrieval_bench.encoders.flag import model_token_limit

    if config:
        (tmp_path / "config.json").write_text(json.dumps(config))
    if tokenizer:
        (tmp_path / "tokenizer_config.json").write_text(json.dumps(tokenizer))
    assert model_token_limit(tmp_path) == limit


@pytest.mark.slow  # a (tiny) cross-encoder: torch and FlagEmbedding
def test_a_cross_encoder_shorter_than_the_asked_length_takes_its_own_limit(
    tiny_reranker: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The tiny model has 130 positions (128 tokens after XLM-R's padding offset); the judge's
    and the stage's default 512 crashed inside FlagEmbedding on a longer pair (AttributeError:
    'list' object has no attribute 'keys', exit 3)."""
    import logging

    import transformers
    from FlagEmbedding import FlagReranker

    from retrieval_bench.encoders.flag import model_token_limit
    from retrieval_bench.judge.base import Pair
    from retrieval_bench.judge.cross_encoder import CrossEncoderJudge

    # The reference: the positions the loaded model's embeddings have, less its padding offset.
    loaded = transformers.XLMRobertaForSequenceClassification.from_pretrained(tiny_reranker)
    embeddings = loaded.roberta.embeddings
    positions = embeddings.position_embeddings.num_embeddings - embeddings.padding_idx - 1
    assert model_token_limit(tiny_reranker) == positions == 128
    long = "三亚蜈支洲岛门票多少钱，怎么去？" * 40  # far more than 128 tokens
    pairs = [Pair("q1", "p1", "蜈支洲岛", long), Pair("q1", "p2", "蜈支洲岛", "海口")]
    judge = CrossEncoderJudge(str(tiny_reranker))
    got: dict[int, float] = {}
    judge.judge(pairs, lambda i, verdict: got.__setitem__(i, verdict.raw))
    reference = FlagReranker(str(tiny_reranker), devices=["cpu"], batch_size=32)
    expected = reference.compute_score(
        [(p.query, p.passage) for p in pairs], batch_size=32, max_length=128
    )
    assert [got[0], got[1]] == pytest.approx(list(expected), abs=1e-6)
    assert judge.describe()["max_length"] == 128
    with caplog.at_level(logging.INFO, logger="retrieval_bench.stages.rerank"):
        asked = CrossEncoderJudge(str(tiny_reranker), max_length=512)
    assert asked.reranker.max_length == 128
    assert "--max-length=512 is more than" in caplog.text and "pairs are cut to 128" in caplog.text
    stage = CrossEncoderReranker(
        RerankConfig(model=str(tiny_reranker), depth=2),
        [long, "海口"],
        TieBreak(["a", "b"]),
    )
    (ranked,) = stage.apply([_query("q1", "蜈支洲岛")], [_ranked([0, 1])])
    assert sorted(ranked.scores.tolist()) == pytest.approx(sorted(expected), abs=1e-6)
    assert stage.info()["max_length"] == 128 and stage.info()["model_max_length"] == 128


def test_rerank_ties_broken_by_id_descending(tmp_path: Path) -> None:
    # The scores are given, so no model is loaded (none could be from this folder).
    cfg = RerankConfig(model=unloadable_model(tmp_path), depth=4)
    reranker = CrossEncoderReranker(cfg, TEXTS, TieBreak([p.id for p in PASSAGES]))
    reranker.score = lambda pairs: np.array([0.5, 0.9, 0.5, 0.5][: len(pairs)])  # type: ignore[method-assign]
    (ranked,) = reranker.apply([_query()], [_ranked([0, 4, 2, 1, 3])])
    assert ranked.indices.tolist() == [4, 2, 1, 0]  # 0.9, then the 0.5s by id descending


def test_rerank_empty_ranking_loads_no_model(tmp_path: Path) -> None:
    cfg = RerankConfig(model=unloadable_model(tmp_path), depth=4)
    reranker = CrossEncoderReranker(cfg, TEXTS, TieBreak([p.id for p in PASSAGES]))
    empty = Ranked(np.zeros(0, np.int64), np.zeros(0), 5, NO_QUERY_TERMS)
    (ranked,) = reranker.apply([_query()], [empty])
    assert (ranked.returned, ranked.empty_reason) == (0, NO_QUERY_TERMS)


def test_missing_reranker_model_names_the_ways_out(tmp_path: Path) -> None:
    missing = tmp_path / "bge-reranker-v2-m3"
    cfg = RerankConfig(model=str(missing))
    with pytest.raises(EncoderUnavailable) as refused:
        CrossEncoderReranker(cfg, TEXTS, TieBreak([p.id for p in PASSAGES]))
    assert str(refused.value) == (
        f"stages.rerank model {str(missing)!r} cannot be loaded: no directory at {missing}. "
        "Set stages.rerank.model=/local/path/to/bge-reranker-v2-m3 to a downloaded copy of the "
        "model, or run without a rerank stage: leave stages.rerank.model empty (reranker=none)."
    )


def test_hub_id_reranker_not_cached_offers_download(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-hf-home"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    cfg = RerankConfig(model="BAAI/bge-reranker-v2-m3")
    with pytest.raises(EncoderUnavailable) as refused:
        CrossEncoderReranker(cfg, TEXTS, TieBreak([p.id for p in PASSAGES]))
    message = str(refused.value)
    assert "downloads are off (stages.rerank.allow_download=false)" in message
    assert "reranker=none" in message
    assert message.endswith(
        "(or stages.rerank.allow_download=true to download it, where the Hugging Face hub is "
        "reachable)."
    )


# --------------------------------------------------------------------------------------------
# where labelled passages were lost; refusal on the reranker's score
# --------------------------------------------------------------------------------------------


def test_stage_loss_counts_the_first_stage_lacking_each_passage() -> None:
    queries = [
        EvalQuery("q1", "t", "fact", "reviewed", {"a": 1, "b": 1, "c": 1, "d": 1, "e": 1}),
        EvalQuery("q2", "t", "route", "reviewed", {"a": 2, "z": 0}),
        EvalQuery("q3", "t", "fact", "unreviewed", {"a": 1}),
        EvalQuery("q4", "t", "route", "reviewed", {"p": 1, "q": 1, "r": 1, "s": 1}),
    ]
    rankings = {
        "q1": {
            "bm25": ["a", "b", "x"],
            "dense": ["c", "d", "e"],
            "fused": ["a", "b", "c", "d", "e", "x"],
            "rerank": ["a", "c", "d", "e"],  # b: lost by the reranker
            "final": ["a", "c", "e"],  # d: below the cut
            "context": ["a", "e"],  # c: over the budget
        },
        "q2": {"bm25": ["x"], "dense": ["y"], "fused": ["x", "y"], "final": ["x", "y"]},
        "q3": {"bm25": ["a"], "final": ["a"]},
        # One arm (no fused): the first stage is the pool; its rerank lost p, its final q.
        "q4": {"dense": ["p", "q", "r"], "rerank": ["q", "r"], "final": ["r"]},
    }
    loss = stage_loss(rankings, judge(queries))
    assert loss["checkpoints"] == ["pool", "fused", "rerank", "final", "context"]
    zero = {"pool": 0, "fused": 0, "rerank": 0, "final": 0, "context": 0, "kept": 0}
    assert loss["by_type"] == {
        "fact": {
            "queries": 1,
            "labelled": 5,
            "lost_at": {**zero, "rerank": 1, "final": 1, "context": 1, "kept": 2},
        },
        "route": {
            "queries": 2,
            "labelled": 5,
            "lost_at": {**zero, "pool": 2, "rerank": 1, "final": 1, "kept": 1},
        },
    }
    assert loss["overall"] == {
        "queries": 3,
        "labelled": 10,
        "lost_at": {"pool": 2, "fused": 0, "rerank": 2, "final": 2, "context": 1, "kept": 3},
    }
    assert loss["per_query"] == {
        "q1": {"rerank": ["b"], "final": ["d"], "context": ["c"]},
        "q2": {"pool": ["a"]},
        "q4": {"rerank": ["p"], "final": ["q"], "pool": ["s"]},
    }


def test_refusal_auto_prefers_the_rerankers_score() -> None:
    recorded = [["bm25", "dense", "fused", "rerank", "final", "context"]] * 2
    assert choose_stage("auto", recorded) == "rerank"
    assert choose_stage("context", recorded) == "context"


@pytest.mark.slow
def test_rerank_on_two_workers_scores_as_one(tiny_reranker: Path) -> None:
    """stages.rerank.devices=[cpu,cpu]: FlagEmbedding's own worker pool, started before scoring."""
    texts = ["北京是中国的首都", "上海的交通非常方便。", "我喜欢吃苹果和香蕉。", "股市大跌。"]
    queries = [_query("q1", "北京"), _query("q2", "上海交通"), _query("q3", "苹果")]
    results = []
    for devices in (["cpu"], ["cpu", "cpu"]):
        cfg = RerankConfig(
            model=str(tiny_reranker), depth=4, devices=devices
        )
        reranker = CrossEncoderReranker(cfg, texts, TieBreak(["a", "b", "c", "d"]))
        results.append(reranker.apply(queries, [_ranked([0, 1, 2, 3])] * 3))
    for one, two in zip(*results, strict=True):
        # Each passage's score agrees to float noise (the workers batch the pairs differently).
        by_passage = dict(zip(two.indices.tolist(), two.scores.tolist(), strict=True))
        expected = [by_passage[i] for i in one.indices.tolist()]
        np.testing.assert_allclose(expected, one.scores, rtol=0, atol=1e-6)
        assert two.scores.tolist() == sorted(two.scores.tolist(), reverse=True)
