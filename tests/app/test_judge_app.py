"""The judge as a process and with a real cross-encoder (slow): a judging run killed with
SIGKILL resumes from its cache, asking only what it had no answer for; the tiny random
FlagReranker's calibration chooses thresholds on one half of the queries and reports the
agreement on the other, and a pool is judged with the thresholds it chose."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import MINI_CORPUS as CORPUS
from conftest import ROOT
from support.datasets import read_jsonl
from support.judge_server import pair_of
from support.judging import TRAVEL_CORPUS, expected_grade, with_people_zeros
from support.random_models import build_random_cross_encoder
from support.references import cohen_kappa_score
from support.service_server import Reply, serve

from retrieval_bench.data.evalset import load_evalset
from run.judge import main as judge_main


@pytest.mark.slow
def test_a_killed_run_resumes_from_its_cache(
    judge_sweep: tuple[Path, Path], tmp_path: Path
) -> None:
    folder, _ = judge_sweep
    pool = read_jsonl(folder / "pool.jsonl")
    answered_before_kill = 5
    asked: list[tuple[str, str]] = []
    stalled = threading.Event()

    def respond(body: dict[str, object]) -> Reply:
        query, passage = pair_of(body["messages"][0]["content"])  # type: ignore[index]
        asked.append((query, passage))
        if len(asked) == answered_before_kill + 1 and not stalled.is_set():
            stalled.set()
            time.sleep(30)  # the run is killed while it waits for this answer
        grade = expected_grade({"query": query, "text": passage})[0]
        return 200, {"choices": [{"message": {"content": f"##final score: {grade}"}}]}

    out = tmp_path / "judgments.jsonl"
    with serve(respond) as (url, _):
        base = url.rsplit("/", 1)[0] + "/v1"
        cmd = [sys.executable, "-m", "run.judge", str(folder / "pool.jsonl"), "--judge", "openai"]
        cmd += ["--url", base, "--model", "stand-in", "--cache-dir", str(tmp_path)]
        cmd += ["--out", str(out), "--concurrency", "1"]
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stderr=subprocess.PIPE)
        assert stalled.wait(120), "the run never reached its sixth request"
        # The worker asked for the sixth pair once the fifth was answered; wait for the
        # fifth answer's cache entry (written by the main thread), then kill.
        for _ in range(600):
            if len(list((tmp_path / "judge").rglob("*.json"))) >= answered_before_kill:
                break
            time.sleep(0.1)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        assert not out.exists()  # written whole at the end, never half
        cached = list((tmp_path / "judge").rglob("*.json"))
        assert len(cached) == answered_before_kill
        first = list(asked[:answered_before_kill])
        asked.clear()
        done = subprocess.run(
            cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr
    assert len(asked) == len(pool) - answered_before_kill
    assert not set(asked) & set(first)  # nothing answered before the kill was asked again
    judged = read_jsonl(out)
    assert sum(r["cached"] for r in judged) == answered_before_kill
    assert all(r["grade"] == expected_grade(r)[1] for r in judged)


@pytest.mark.slow
def test_cross_encoder_calibrates_on_one_half_and_judges_a_pool(
    judge_sweep: tuple[Path, Path], tmp_path: Path
) -> None:
    model = tmp_path / "reranker"
    model.mkdir()
    build_random_cross_encoder(model)
    evalset = with_people_zeros(tmp_path)
    out = tmp_path / "cal"
    args = ["--calibrate", "--evalset", str(evalset), "--corpus", str(TRAVEL_CORPUS)]
    args += ["--judge", "cross_encoder", "--model", str(model), "--cache-dir", str(tmp_path)]
    assert judge_main([*args, "--out", str(out), "--sample", "200", "--seed", "1"]) == 0
    record = json.loads((out / "calibration.json").read_text(encoding="utf-8"))
    fit = record["fit"]
    judgments = read_jsonl(out / "calibration.jsonl")
    assert len(judgments) == 200 == fit["fit_pairs"] + fit["evaluated_pairs"]
    thresholds = fit["thresholds"]
    assert record["judge"]["thresholds"] == thresholds and len(thresholds) == 1
    for r in judgments:
        assert r["grade"] == int(r["raw_answer"] >= thresholds[0]) and r["thresholds"] == thresholds
    people = {
        (q.query_id, pid): grade
        for q in load_evalset(evalset)
        for pid, grade in q.relevance.items()
    }
    # The halves split queries; the agreement reported is the held-out half's only.
    fitted = set(fit["fit_query_ids"])
    held = [r for r in judgments if r["query_id"] not in fitted]
    assert len(held) == fit["evaluated_pairs"] == record["agreement"]["all"]["n"]
    a = [int(people[(r["query_id"], r["id"])] > 0) for r in held]
    b = [r["grade"] for r in held]
    assert record["agreement"]["all"]["kappa_binary"] == pytest.approx(cohen_kappa_score(a, b))
    # On its own half the threshold is the best cut there is.
    fit_rows = [r for r in judgments if r["query_id"] in fitted]
    scores = np.array([r["raw_answer"] for r in fit_rows])
    truth = [int(people[(r["query_id"], r["id"])] > 0) for r in fit_rows]
    best = max(cohen_kappa_score(truth, (scores >= t).astype(int)) for t in np.unique(scores))
    chosen = cohen_kappa_score(truth, (scores >= thresholds[0]).astype(int))
    assert chosen == pytest.approx(best)

    folder, _ = judge_sweep
    judged = tmp_path / "judged.jsonl"
    cmd = [str(folder / "pool.jsonl"), "--judge", "cross_encoder", "--model", str(model)]
    cmd += ["--calibration", str(out / "calibration.json"), "--cache-dir", str(tmp_path)]
    assert judge_main([*cmd, "--out", str(judged)]) == 0
    rows = read_jsonl(judged)
    assert len(rows) == len(read_jsonl(folder / "pool.jsonl"))
    assert all(r["grade"] == int(r["raw_answer"] >= thresholds[0]) for r in rows)
    assert all(r["judge"] == "cross_encoder" and r["thresholds"] == thresholds for r in rows)
    from run.pool import main as pool_main

    args = ["--import", str(judged), "--evalset", str(folder.parent / "mini.jsonl")]
    assert pool_main([*args, "--corpus", str(CORPUS), "--out", str(tmp_path / "s.jsonl")]) == 0
