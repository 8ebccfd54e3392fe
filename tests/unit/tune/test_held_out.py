"""The held-out estimate of `python -m run.tune`, on a set small enough for the fast tier: each
fold is searched on the other folds and scored on its own queries (fold numbers of two digits
included), the held-out score and the gap follow from the folds, and every study's sampler has
its own seed derived from the run's (tune.json states them).

A generated set of 22 queries of two types (BM25 only, about 70 short passages): its per-query
nDCG@3 differs within each type and moves with `arms.bm25.k1`, so a fold scored on the wrong
queries, or a choice scored under another configuration, shows in the means. The same checks
run against fresh jobs of the shipped travel slice in tests/unit/tune/test_tune.py (slow)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import pytest

from retrieval_bench.api import compose
from retrieval_bench.io.strict_json import jsonl_text
from retrieval_bench.job.runner import run_job
from retrieval_bench.tune.names import TUNE_JSON
from retrieval_bench.tune.run import Tuner, TuneRequest
from retrieval_bench.tune.study import ALL_QUERIES, fold_study, sampler_seed

FOLDS = 11  # two-digit fold numbers: fold-10 must hold out fold 10's queries, not fold 0's
QUERIES = 2 * FOLDS  # one query of each type per fold


def write_set(root: Path) -> list[str]:
    """Per topic i: `a` holds the rare token once with the query's second word, `c` holds it
    three times in a longer text (so k1, which caps a term's repeats, decides between them),
    `b` once. Relevant: a, b or c by i mod 3, so nDCG@3 is 1, 0.63 or 0.5 by the passage's rank.
    """
    corpus = root / "corpus" / "held"
    corpus.mkdir(parents=True)
    passages, queries = [], []
    for i in range(QUERIES):
        kw = f"kw{i:03d}"
        passages += [
            {"id": f"t{i:03d}-a", "text": f"{kw} 门票 价格"},
            {"id": f"t{i:03d}-b", "text": f"{kw} 交通 路线 公交 打车 地铁"},
            {"id": f"t{i:03d}-c", "text": f"{kw} {kw} {kw} 历史 文化 介绍 故事 人物"},
        ]
        queries.append(
            {
                "query_id": f"q{i:03d}",
                "query": f"{kw} 门票",
                "query_type": "odd" if i % 2 else "even",
                "label_status": "reviewed",
                "relevant_ids": [f"t{i:03d}-{'abc'[i % 3]}"],
            }
        )
    (corpus / "passages.jsonl").write_text(jsonl_text(passages), encoding="utf-8")
    evalset = root / "held.jsonl"
    evalset.write_text(jsonl_text(queries), encoding="utf-8")
    return [
        "dataset.name=held",
        f"dataset.corpus={corpus}",
        f"dataset.evalset={evalset}",
        f"cache_dir={root / 'cache'}",
        "retriever=bm25",
        "top_k=3",
    ]


@pytest.fixture(scope="module")
def tuning(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], dict[str, Any], Tuner]:
    root = tmp_path_factory.mktemp("held_out")
    job = write_set(root)
    tuner = Tuner(
        TuneRequest(
            [*job, f"tune.dir={root / 'tune'}", "arms.bm25.k1=interval(0.1,3.0)",
             "tune.trials=1", f"tune.folds={FOLDS}", "tune.seed=5", "tune.metric=ndcg@3"]
        )
    )  # fmt: skip
    tuner.run()
    summary = json.loads((root / "tune" / TUNE_JSON).read_text(encoding="utf-8"))
    return job, summary, tuner


def _fresh(job: list[str], chosen: list[str]) -> dict[str, float]:
    """query id -> nDCG@3 of a fresh job of the overrides `chosen`."""
    rows = run_job(compose([*job, *chosen])).metrics["stages"]["final"]["per_query"]
    return {q: row["ndcg@3"] for q, row in rows.items()}


def test_each_fold_is_searched_on_the_others_and_scored_on_its_own(
    tuning: tuple[list[str], dict[str, Any], Tuner],
) -> None:
    job, summary, tuner = tuning
    folds = summary["folds"]
    assert [f["fold"] for f in folds] == list(range(FOLDS))
    every = set(tuner.ids)
    assert len(every) == QUERIES
    tests = []
    for fold in folds:
        test, train = fold["test_ids"], fold["train_ids"]
        # The fold's own queries: those `fold_of` puts in it, one of each type.
        assert sorted(test) == sorted(q for q in every if tuner.fold_of[q] == fold["fold"])
        assert len(test) == 2 and set(train) == every - set(test)
        # Each query's value under the fold's choice (a fresh job for the last fold, the
        # two-digit one; the tuner's replay, which equals a fresh job (test_tune.py), for the
        # others, to keep this in the fast tier).
        if fold["fold"] == FOLDS - 1:
            values = _fresh(job, fold["chosen"])
        else:
            [chosen] = fold["chosen"]
            cfg = tuner.configs.make({"arms.bm25.k1": float(chosen.partition("=")[2])})
            values = dict(zip(tuner.ids, tuner.scores(cfg, tuner.ids, fold["chosen"]).tolist(),
                              strict=True))  # fmt: skip
        # Its search ran on the other folds: its best value is the choice's mean there...
        assert math.isclose(fold["train_score"], np.mean([values[q] for q in train]),
                            abs_tol=1e-12)  # fmt: skip
        # ...and its held-out score is the same choice on its own queries.
        assert math.isclose(fold["test_score"], np.mean([values[q] for q in test]),
                            abs_tol=1e-12)  # fmt: skip
        tests += test
    assert sorted(tests) == sorted(every)
    held_out = float(np.mean([f["test_score"] for f in folds]))
    assert math.isclose(summary["held_out_score"], held_out, abs_tol=1e-12)
    tuned = _fresh(job, summary["tuned"]["chosen"])
    assert math.isclose(summary["tuned_score"], float(np.mean(list(tuned.values()))),
                        abs_tol=1e-12)  # fmt: skip
    assert math.isclose(summary["gap"], summary["tuned_score"] - held_out, abs_tol=1e-12)
    # The set is one where the choice matters: the folds did not all score alike.
    assert len({round(f["test_score"], 12) for f in folds}) > 1


def test_every_study_draws_from_its_own_seed_stated_in_tune_json(
    tuning: tuple[list[str], dict[str, Any], Tuner],
) -> None:
    _, summary, tuner = tuning
    names = [ALL_QUERIES, *(fold_study(f) for f in range(FOLDS))]
    seeds = summary["settings"]["sampler_seeds"]
    assert list(seeds) == names
    assert seeds == {n: sampler_seed(5, n) for n in names}
    assert len(set(seeds.values())) == len(names)  # a distinct seed per study
    assert "SeedSequence(tune.seed" in summary["settings"]["sampler_seed_rule"]
    # Derived from the run's seed: another run seed gives other seeds, the same one the same.
    assert sampler_seed(6, "fold-3") != sampler_seed(5, "fold-3") == seeds["fold-3"]
    # So the studies' first trials differ (seeded alike, every study drew the same first k1).
    storage = optuna.storages.RDBStorage(summary["storage"])
    first = {
        study.study_name: storage.get_all_trials(study._study_id)[0].params["arms.bm25.k1"]
        for study in storage.get_all_studies()
    }
    assert sorted(first) == sorted(names)
    assert len(set(first.values())) == len(names)
    assert tuner.cfg.tune.seed == 5


def test_a_negative_seed_is_refused_naming_the_key() -> None:
    from retrieval_bench.config.tune import TuneConfig
    from retrieval_bench.errors import ConfigError

    with pytest.raises(ConfigError, match=r"tune\.seed.*non-negative"):
        TuneConfig(seed=-1).validate()
