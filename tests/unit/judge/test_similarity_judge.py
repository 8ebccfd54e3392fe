"""The similarity judge (`--judge similarity --model use`): each pair's score is the cosine of
USE's query and passage vectors, computed here by hand from the encoder; grades are the
thresholds reached; each text is encoded once; scores are cached, so a rerun encodes nothing;
calibration chooses its thresholds as a cross-encoder's; and `run.judge` grades a pool with it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from support.datasets import read_jsonl
from support.judging import TRAVEL_CORPUS, with_people_zeros

from retrieval_bench.config.encoder import EncoderConfig
from retrieval_bench.config.judge import JudgeSettings
from retrieval_bench.encoders import build_encoder
from retrieval_bench.errors import ConfigError
from retrieval_bench.judge.base import Pair, Verdict
from retrieval_bench.judge.build import build_judge
from retrieval_bench.judge.cache import JudgeCache
from retrieval_bench.judge.judging import judge_pairs
from retrieval_bench.judge.similarity import SimilarityJudge
from run.judge import main as judge_main

PAIRS = [
    Pair("q1", "p1", "三亚哪里潜水好", "蜈支洲岛\n蜈支洲岛是三亚潜水最好的地方之一"),
    Pair("q1", "p2", "三亚哪里潜水好", "海口骑楼老街\n骑楼老街有许多老建筑"),
    Pair("q2", "p1", "蜈支洲岛门票", "蜈支洲岛\n蜈支洲岛是三亚潜水最好的地方之一"),
]


def _spec(thresholds: list[float] | None) -> JudgeSettings:
    return JudgeSettings(kind="similarity", model="use", thresholds=thresholds or [])


@pytest.mark.slow  # loads USE from its wheel
def test_scores_are_the_encoder_s_cosines_and_grades_the_thresholds_reached(tmp_path: Path) -> None:
    judge = build_judge(_spec([0.3, 0.5]), (0, 1, 2), need_thresholds=True)
    assert isinstance(judge, SimilarityJudge)
    encoded: list[str] = []
    original = judge.encoder.encode_passages

    def counting(texts: list[str]) -> np.ndarray:
        encoded.extend(texts)
        return original(texts)

    judge.encoder.encode_passages = counting  # type: ignore[method-assign]
    verdicts = judge_pairs(PAIRS, judge, JudgeCache(tmp_path))
    assert sorted(encoded) == sorted({p.passage for p in PAIRS})  # each passage once
    reference = build_encoder(EncoderConfig())
    for pair, verdict in zip(PAIRS, verdicts, strict=True):
        q = reference.encode_queries([pair.query])[0]
        p = reference.encode_passages([pair.passage])[0]
        assert verdict.raw == pytest.approx(float(q @ p), abs=1e-6)
        assert verdict.grade == sum(float(q @ p) >= t for t in (0.3, 0.5))
    assert verdicts[0].raw > verdicts[1].raw  # the diving passage, not the old street
    # A rerun is answered from the cache, and new thresholds re-grade without encoding.
    encoded.clear()
    again = build_judge(_spec([0.9, 0.95]), (0, 1, 2), need_thresholds=True)
    cached = judge_pairs(PAIRS, again, JudgeCache(tmp_path))
    assert all(v.cached for v in cached) and not encoded
    assert [v.raw for v in cached] == [v.raw for v in verdicts]
    assert all(isinstance(v, Verdict) and v.grade == 0 for v in cached)


def test_bad_settings_are_refused_naming_the_flag() -> None:
    with pytest.raises(ConfigError, match="--thresholds"):
        build_judge(_spec(None), (0, 1), need_thresholds=True)
    with pytest.raises(ConfigError, match="--thresholds"):
        build_judge(_spec([0.5, 0.2]), (0, 1, 2), need_thresholds=True)
    with pytest.raises(ConfigError, match="--model"):
        build_judge(
            JudgeSettings(kind="similarity", model="/no/such/model"),
            (0, 1),
            need_thresholds=False,
        )


@pytest.mark.slow  # loads USE from its wheel
def test_calibration_chooses_its_thresholds_and_judging_a_pool_uses_them(tmp_path: Path) -> None:
    evalset = with_people_zeros(tmp_path)
    cal = tmp_path / "cal"
    args = ["--judge", "similarity", "--model", "use", "--cache-dir", str(tmp_path / "cache")]
    calibrate = ["--calibrate", "--evalset", str(evalset), "--corpus", str(TRAVEL_CORPUS)]
    assert judge_main([*calibrate, *args, "--sample", "120", "--out", str(cal)]) == 0
    record = json.loads((cal / "calibration.json").read_text(encoding="utf-8"))
    assert record["judge"]["kind"] == "similarity" and record["fit"] is not None
    (threshold,) = record["fit"]["thresholds"]
    pool = tmp_path / "pool.jsonl"
    rows = read_jsonl(cal / "calibration.jsonl")[:20]
    records = [
        {"query_id": r["query_id"], "query": r["query"], "id": r["id"], "text": r["text"]}
        | {"title": r.get("title") or "", "grade": None}
        for r in rows
    ]
    pool.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), "utf-8")
    out = tmp_path / "judgments.jsonl"
    assert judge_main([str(pool), *args, "--calibration", str(cal), "--out", str(out)]) == 0
    judged = read_jsonl(out)
    assert all(r["thresholds"] == [threshold] and r["judge"] == "similarity" for r in judged)
    assert all(r["grade"] == int(float(r["raw_answer"]) >= threshold) for r in judged)
