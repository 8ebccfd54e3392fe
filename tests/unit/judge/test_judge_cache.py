"""The judge's answer cache (`judge.cache`) shared by two models: its key holds the model, so
one model's grades are never served as another's (the chat judge, against the stand-in model on
127.0.0.1; the cross-encoder's key holds its model files' fingerprint, two random models on
disk, slow: it loads FlagEmbedding)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.judge_server import chat_model

from retrieval_bench.config.judge import JudgeSettings
from retrieval_bench.judge.base import Pair
from retrieval_bench.judge.build import build_judge
from retrieval_bench.judge.cache import JudgeCache
from retrieval_bench.judge.judging import judge_pairs

PAIRS = [
    Pair("q1", "p1", "三亚蜈支洲岛门票", "蜈支洲岛\n门票 成人 价格"),
    Pair("q1", "p2", "三亚蜈支洲岛门票", "海口\n骑楼老街 历史"),
]


def test_two_chat_models_share_a_cache_but_not_their_answers(tmp_path: Path) -> None:
    cache = JudgeCache(tmp_path)
    cached = []
    with chat_model() as (url, received):
        for model in ("model-a", "model-b", "model-a", "model-b"):
            spec = JudgeSettings(kind="openai", url=url, model=model, concurrency=1)
            verdicts = judge_pairs(PAIRS, build_judge(spec, (0, 1, 2, 3), False), cache)
            cached.append([v.cached for v in verdicts])
        asked = [body["model"] for body in received]
    # Each model asked once per pair (model-b's first run found model-a's answers no answer
    # of its own); each one's rerun was answered from the cache.
    assert cached == [[False, False], [False, False], [True, True], [True, True]]
    assert sorted(asked) == ["model-a", "model-a", "model-b", "model-b"]
    assert (cache.writes, cache.hits) == (4, 4)


@pytest.mark.slow  # loads FlagEmbedding (torch) and two cross-encoders from their files
def test_two_cross_encoders_share_a_cache_but_not_their_scores(tmp_path: Path) -> None:
    from support.random_models import build_random_cross_encoder

    from retrieval_bench.judge.cross_encoder import CrossEncoderJudge

    keys = []
    for seed in (1, 2):
        folder = tmp_path / f"ce{seed}"
        build_random_cross_encoder(folder, seed=seed)
        judge = CrossEncoderJudge(str(folder), thresholds=[0.0])
        keys.append(JudgeCache.key(judge.cache_key(PAIRS[0])))
    assert keys[0] != keys[1]


@pytest.mark.slow  # loads FlagEmbedding (torch) and a cross-encoder from its files
def test_a_cross_encoders_cut_is_part_of_its_cache_key(tmp_path: Path) -> None:
    """The same model cutting pairs at 16 or at 32 tokens gives a long pair two scores: the
    cache must not serve one cut's score as the other's."""
    from support.random_models import build_random_cross_encoder

    from retrieval_bench.judge.cross_encoder import CrossEncoderJudge

    build_random_cross_encoder(tmp_path / "ce", seed=1)
    keys = [
        JudgeCache.key(
            CrossEncoderJudge(str(tmp_path / "ce"), [0.0], max_length=length).cache_key(PAIRS[0])
        )
        for length in (16, 32, 32)
    ]
    assert keys[0] != keys[1] and keys[1] == keys[2]
