"""`python -m run.tune`: a replayed trial scores as a fresh job of its configuration; each fold's
held-out score is a fresh job of the fold's choice scored on the fold's queries; tuned.yaml
composes to the choice; a killed tuning resumes without redoing finished trials; per-type
weights; every bad input exits 2 naming its key.

In process, on a small slice of the shipped travel set (every reviewed query of five types
whose relevant passages are in it, plus distractors: about 60 passages), encoded once per
session in the shared cache."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import pytest
from conftest import ROOT

from retrieval_bench.api import compose
from retrieval_bench.errors import ConfigError
from retrieval_bench.job.runner import run_job
from retrieval_bench.tune.names import STUDY_DB, TUNE_JSON, TUNED_YAML
from retrieval_bench.tune.replay import Replay
from retrieval_bench.tune.run import Tuner, TuneRequest, split_overrides
from retrieval_bench.tune.space import (
    build_space,
    distribution,
    override_string,
    shrink_type_weights,
)
from retrieval_bench.tune.study import ALL_QUERIES, fold_study, storage_url
from retrieval_bench.tune.tuned import compose_tuned
from run.tune import main as tune_main

TYPES = ("constraint_dense", "entity_exact", "fuzzy_intent", "multi_hop", "negation")
PER_TYPE = 4


@pytest.fixture(scope="module")
def slice_overrides(tmp_path_factory: pytest.TempPathFactory, shared_cache: Path) -> list[str]:
    """A travel slice as a native dataset: PER_TYPE reviewed queries of each type, two
    no_answer ones, the passages they label and as many distractors, the whole lexicon."""
    root = tmp_path_factory.mktemp("travel_slice")
    queries = [json.loads(x) for x in (ROOT / "evalsets/travel.jsonl").open(encoding="utf-8")]
    taken: Counter[str] = Counter()
    chosen = []
    for q in queries:
        kind = q["query_type"] if q["label_status"] == "reviewed" else q["label_status"]
        if (kind in TYPES and taken[kind] < PER_TYPE) or (kind == "no_answer" and taken[kind] < 2):
            taken[kind] += 1
            chosen.append(q)
    passages = [
        json.loads(x) for x in (ROOT / "corpus/travel/passages.jsonl").open(encoding="utf-8")
    ]
    needed = {pid for q in chosen for pid in q.get("relevant_ids", [])}
    needed |= {pid for q in chosen for pid in (q.get("relevance") or {})}
    kept = [p for p in passages if p["id"] in needed]
    kept += [p for p in passages if p["id"] not in needed][: len(kept)]
    corpus = root / "corpus" / "slice"
    corpus.mkdir(parents=True)
    (corpus / "passages.jsonl").write_text(
        "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in kept), encoding="utf-8"
    )
    (corpus / "lexicon.jsonl").write_text(
        (ROOT / "corpus/travel/lexicon.jsonl").read_text(encoding="utf-8"), encoding="utf-8"
    )
    evalset = root / "slice.jsonl"
    evalset.write_text(
        "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in chosen), encoding="utf-8"
    )
    return [
        "dataset.name=slice",
        f"dataset.corpus={corpus}",
        f"dataset.evalset={evalset}",
        f"cache_dir={shared_cache}",
    ]


def per_query(result: Any, metric: str, qids: list[str]) -> list[float]:
    values = result.metrics["stages"]["final"]["per_query"]
    return [values[q][metric] for q in qids]


def tuner(overrides: list[str], folder: Path, *extra: str) -> Tuner:
    return Tuner(TuneRequest([*overrides, f"tune.dir={folder}", *extra]))


@pytest.mark.parametrize(
    "settings",
    [
        ["combiners.rrf.k=7", "retriever.weights=[0.2,0.9]"],
        ["retriever.combine=score", "combiners.score.normalize=zscore",
         "retriever.weights=[1,0.3]"],
        ["retriever.pool_size=7", "combiners.rrf.k=90"],
        ["router=rules", "router.short_query_length=6", "combiners.rrf.k=30"],
        ["retriever.type_weights_from=label", "+retriever.type_weights.negation=[1.0,0.0]"],
    ],
    ids=["rrf", "score", "pool", "router", "type-weights"],
)
@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_a_replayed_trial_scores_as_a_fresh_job(
    slice_overrides: list[str], settings: list[str]
) -> None:
    """The replay (pools reused from another configuration's trial) gives each query the value
    a fresh job of the same configuration gives it, exactly."""
    replay = Replay(compose(slice_overrides))
    first = compose([*slice_overrides, "combiners.rrf.k=60"])
    ids = replay.scored_ids
    replay.scores(first, ids, ("ndcg", 6), "final")
    cfg = compose([*slice_overrides, *settings])
    replayed = replay.scores(cfg, ids, ("ndcg", 6), "final")
    fresh = run_job(cfg)
    assert replayed.tolist() == per_query(fresh, "ndcg@6", ids)
    for metric in (("recall", 6), ("mrr", 6)):
        values = replay.scores(cfg, ids, metric, "final")
        assert values.tolist() == per_query(fresh, f"{metric[0]}@6", ids)


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_only_new_arm_settings_search_again(slice_overrides: list[str]) -> None:
    """Fusion settings reuse every pool; a BM25 setting (a key of the bm25 arm's own node)
    builds that arm again, from the token cache, and only it: the dense arm keeps its pools."""
    replay = Replay(compose(slice_overrides))
    ids = replay.scored_ids
    for k in (10, 30, 60):
        cfg = compose([*slice_overrides, f"combiners.rrf.k={k}"])
        replay.scores(cfg, ids, ("ndcg", 6), "final")
    assert replay.work() == {
        "arm_settings_built": 2,
        "pools_searched": 2 * len(ids),
        "queries_replayed": 2 * len(ids),
        "pools_reused": 0,
    }
    replay.scores(compose([*slice_overrides, "arms.bm25.k1=0.9"]), ids, ("ndcg", 6), "final")
    assert replay.work()["arm_settings_built"] == 3
    assert replay.work()["pools_searched"] == 3 * len(ids)


@pytest.fixture(scope="module")
def tuned(slice_overrides: list[str], tmp_path_factory: pytest.TempPathFactory) -> Tuner:
    folder = tmp_path_factory.mktemp("tuned")
    job = tuner(
        slice_overrides,
        folder,
        "combiners.rrf.k=range(1,101)",
        "retriever.weights=interval(0,1)",
        "tune.trials=5",
        "tune.folds=2",
        "tune.baseline={combiners.rrf.k:60}",
    )
    job.run()
    return job


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_each_folds_held_out_score_is_a_fresh_job_of_its_choice(
    tuned: Tuner, slice_overrides: list[str]
) -> None:
    summary = json.loads((Path(tuned.cfg.tune.dir) / TUNE_JSON).read_text(encoding="utf-8"))
    assert summary["metric"] == "ndcg@6"
    assert len(summary["folds"]) == 2
    every = set(tuned.ids)
    tests = []
    for fold in summary["folds"]:
        assert set(fold["train_ids"]) | set(fold["test_ids"]) == every
        assert not set(fold["train_ids"]) & set(fold["test_ids"])
        fresh = run_job(compose([*slice_overrides, *fold["chosen"]]))
        values = per_query(fresh, "ndcg@6", fold["test_ids"])
        assert math.isclose(fold["test_score"], float(np.mean(values)), abs_tol=1e-12)
        train = per_query(fresh, "ndcg@6", fold["train_ids"])
        assert math.isclose(fold["train_score"], float(np.mean(train)), abs_tol=1e-12)
        tests.append(fold["test_ids"])
    assert sorted(q for t in tests for q in t) == sorted(every)
    held_out = np.mean([f["test_score"] for f in summary["folds"]])
    assert math.isclose(summary["held_out_score"], held_out, abs_tol=1e-12)
    fresh_all = run_job(compose([*slice_overrides, *summary["tuned"]["chosen"]]))
    tuned_values = per_query(fresh_all, "ndcg@6", tuned.ids)
    assert math.isclose(summary["tuned_score"], float(np.mean(tuned_values)), abs_tol=1e-12)
    assert math.isclose(
        summary["gap"], summary["tuned_score"] - summary["held_out_score"], abs_tol=1e-12
    )
    for qtype in (*TYPES, "all"):
        row = summary["by_type"][qtype]
        assert row["n"] == (PER_TYPE if qtype != "all" else len(every))
        assert math.isclose(row["gap"], row["tuned_score"] - row["held_out_score"], abs_tol=1e-12)
    stored = optuna.load_study(study_name=ALL_QUERIES, storage=summary["storage"])
    assert stored.best_value == summary["tuned_score"]


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_the_baseline_is_compared_on_held_out_queries_only(
    tuned: Tuner, slice_overrides: list[str]
) -> None:
    summary = json.loads((Path(tuned.cfg.tune.dir) / TUNE_JSON).read_text(encoding="utf-8"))
    baseline = summary["baseline"]
    assert baseline["chosen"][0] == "combiners.rrf.k=60"
    fresh = run_job(compose([*slice_overrides, "combiners.rrf.k=60"]))
    assert math.isclose(
        baseline["score"], float(np.mean(per_query(fresh, "ndcg@6", tuned.ids))), abs_tol=1e-12
    )
    row = baseline["held_out_comparison"]["all"]
    held_out = {}
    for fold in summary["folds"]:
        chosen = run_job(compose([*slice_overrides, *fold["chosen"]]))
        test = fold["test_ids"]
        held_out.update(zip(test, per_query(chosen, "ndcg@6", test), strict=True))
    assert row["n"] == len(tuned.ids)
    assert math.isclose(row["value"], float(np.mean(list(held_out.values()))), abs_tol=1e-12)
    assert {"p_value", "p_adjusted", "ci_low", "ci_high", "significant"} <= set(row)


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_tuned_yaml_composes_to_the_configuration_chosen_on_all_queries(
    tuned: Tuner, slice_overrides: list[str]
) -> None:
    folder = Path(tuned.cfg.tune.dir)
    summary = json.loads((folder / TUNE_JSON).read_text(encoding="utf-8"))
    text = (folder / TUNED_YAML).read_text(encoding="utf-8")
    assert "--config-name tuned" in text
    composed = compose_tuned(folder, [ROOT / "conf"])
    expected = compose([*slice_overrides, *summary["tuned"]["chosen"]])
    composed.tune, expected.tune = type(expected.tune)(), type(expected.tune)()
    assert composed == expected


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_a_killed_tuning_resumes_without_redoing_finished_trials(
    slice_overrides: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    space = ["combiners.rrf.k=range(1,101)", "tune.trials=3", "tune.folds=2"]
    calls: list[int] = []
    killed: list[bool] = []
    original = Tuner.objective

    def counted(self: Tuner, train: list[str]) -> Any:
        run = original(self, train)

        def wrapper(trial: optuna.Trial) -> float:
            calls.append(trial.number)
            if len(calls) == 5 and not killed:  # Ctrl-C in the middle of the second study
                killed.append(True)
                raise KeyboardInterrupt
            return run(trial)

        return wrapper

    monkeypatch.setattr(Tuner, "objective", counted)
    with pytest.raises(KeyboardInterrupt):
        tuner(slice_overrides, tmp_path, *space).run()
    storage = storage_url(tmp_path)
    complete = (optuna.trial.TrialState.COMPLETE,)
    done = {
        name: len(optuna.load_study(study_name=name, storage=storage).get_trials(states=complete))
        for name in (ALL_QUERIES, fold_study(0))
    }
    assert done == {ALL_QUERIES: 3, fold_study(0): 1}
    calls.clear()
    tuner(slice_overrides, tmp_path, *space).run()
    # the interrupted trial and the rest: 2 of fold 0, 3 of fold 1; nothing of `all` again
    assert len(calls) == 2 + 3
    summary = json.loads((tmp_path / TUNE_JSON).read_text(encoding="utf-8"))
    assert summary["tuned"]["trials"] == {"complete": 3}
    assert summary["folds"][0]["trials"] == {"complete": 3}  # the interrupted one never stored
    assert (tmp_path / STUDY_DB).is_file()


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_per_type_weights_are_searched_with_their_held_out_estimate(
    slice_overrides: list[str], tmp_path: Path
) -> None:
    job = tuner(
        [*slice_overrides, "retriever.type_weights_from=label"],
        tmp_path,
        "retriever.type_weights=interval(0,1)",
        "tune.trials=3",
        "tune.folds=2",
        "tune.shrinkage=2",
    )
    job.run()
    summary = json.loads((tmp_path / TUNE_JSON).read_text(encoding="utf-8"))
    assert summary["type_source"].startswith("label: ")
    assert "oracle" in summary["type_source"]
    fold = summary["folds"][0]
    chosen = fold["chosen"]
    assert [c.split("=")[0] for c in chosen] == [f"+retriever.type_weights.{t}" for t in TYPES]
    fresh = run_job(compose([*slice_overrides, "retriever.type_weights_from=label", *chosen]))
    values = per_query(fresh, "ndcg@6", fold["test_ids"])
    assert math.isclose(fold["test_score"], float(np.mean(values)), abs_tol=1e-12)


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_a_type_weight_vector_applies_to_its_type_only(slice_overrides: list[str]) -> None:
    """With BM25's weight 1 and dense's 0 for negation queries, their fused ranking is BM25's
    pool order; every other query fuses as without type weights."""
    plain = run_job(compose(slice_overrides))
    typed = run_job(
        compose(
            [*slice_overrides, "retriever.type_weights_from=label",
             "+retriever.type_weights.negation=[1.0,0.0]"]
        )
    )
    for before, after in zip(plain.records, typed.records, strict=True):
        if after.query.query_type == "negation":
            bm25 = after.stages["bm25"].ids
            assert after.stages["fused"].ids[: len(bm25)] == bm25
        else:
            assert after.stages["fused"].ids == before.stages["fused"].ids


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_type_weights_by_route_need_the_rules_router(slice_overrides: list[str]) -> None:
    with pytest.raises(ConfigError, match=r"retriever\.type_weights_from"):
        compose([*slice_overrides, "+retriever.type_weights.negation=[1.0,0.0]"])
    with pytest.raises(ConfigError, match=r"retriever\.type_weights\.negatoin.*did you mean"):
        compose(
            [*slice_overrides, "router=rules", "+retriever.type_weights.negatoin=[1.0,0.0]"]
        )
    compose([*slice_overrides, "router=rules", "+retriever.type_weights.negation=[1.0,0.0]"])


def test_shrinkage_pulls_a_type_with_few_queries_toward_the_global_weights() -> None:
    shrunk = shrink_type_weights({"a": [1.0, 0.0], "b": [0.0, 1.0]}, [0.5, 0.5], {"a": 8}, 2.0)
    assert shrunk == {"a": [0.9, 0.1], "b": [0.5, 0.5]}
    assert shrink_type_weights({"a": [1.0, 0.0]}, [0.5, 0.5], {"a": 3}, 0.0) == {"a": [1.0, 0.0]}


def test_sweeps_become_optuna_distributions_and_values_round_trip() -> None:
    assert distribution("combiners.rrf.k", "range(10,101,10)")[0] == optuna.distributions.IntDistribution(10, 100, step=10)  # noqa: E501
    assert distribution("x", "tag(log,interval(1,100))")[0] == optuna.distributions.FloatDistribution(1, 100, log=True)  # noqa: E501
    assert distribution("x", "zscore,minmax")[0].choices == ("zscore", "minmax")  # type: ignore[attr-defined]
    for value in (37, 0.30000000000000004, "zscore", [0.1, 1.0], {"negation": [1.0, 0.5]}, True):
        assert override_string("k", value).startswith("k=")
    job, space = split_overrides(["top_k=6", "combiners.rrf.k=range(1,5)", "retriever=bm25"])
    assert job == ["top_k=6", "retriever=bm25"] and space == {"combiners.rrf.k": "range(1,5)"}


@pytest.mark.parametrize(
    ("args", "key", "says"),
    [
        (["combiners.rrf.kk=range(1,5)"], "tune.space.combiners.rrf.kk", "did you mean 'k'"),
        (["combiners.rrf.k=range(5,5)"], "tune.space.combiners.rrf.k", "empty range"),
        (["retriever.weights=interval(1,0)"], "tune.space.retriever.weights", "empty range"),
        (["top_k=range(3,9)"], "tune.space.top_k", "fixed top_k"),
        (["combiners.rrf.k=interval(1,9)"], "tune.space.combiners.rrf.k", "expects int"),
        (["combiners.rrf.k=range(1,5)", "tune.folds=5"], "tune.folds", "only 4 scored"),
        (["combiners.rrf.k=range(1,5)", "tune.baseline={retriever.pool_size:10}"],
         "tune.baseline.retriever.pool_size", "not searched"),
        (["combiners.rrf.k=range(1,5)", "tune.baseline={combiners.rrf.kk:10}"],
         "tune.baseline.combiners.rrf.kk", "did you mean 'combiners.rrf.k'"),
        (["combiners.rrf.k=range(1,5)", "tune.metric=recall_pooled@K"], "tune.metric",
         "per-query"),
        (["combiners.rrf.k=range(1,5)", "tune.metric=ndcg@10"], "tune.metric", "scoring.cutoffs"),
        (["tune.trials=3"], "tune.space", "is empty"),
    ],
    ids=["unknown-key", "empty-range", "empty-interval", "top-k", "int-interval", "folds",
         "baseline-not-searched", "baseline-unknown", "pooled-metric", "cutoff", "no-space"],
)  # fmt: skip
def test_bad_input_exits_2_naming_the_key(
    args: list[str],
    key: str,
    says: str,
    slice_overrides: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    folds = [] if any(a.startswith("tune.folds=") for a in args) else ["tune.folds=2"]
    code = tune_main([*slice_overrides, f"tune.dir={tmp_path}", *folds, *args])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"config key '{key}'" in err and says in err, err


def test_a_fold_needs_a_scored_query(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    evalset = tmp_path / "none.jsonl"
    evalset.write_text(
        json.dumps(
            {"query_id": "q1", "query": "三亚", "query_type": "x", "label_status": "unreviewed",
             "relevant_ids": []}
        )
        + "\n",
        encoding="utf-8",
    )
    code = tune_main([f"dataset.evalset={evalset}", f"tune.dir={tmp_path / 'out'}",
                      f"cache_dir={tmp_path / 'cache'}",
                      "retriever=bm25", "retriever.pool_size=range(6,20)"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "config key 'tune.folds'" in err and "no query" in err, err


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_a_second_plan_in_the_same_folder_is_refused(
    tuned: Tuner, slice_overrides: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code = tune_main(
        [*slice_overrides, f"tune.dir={tuned.cfg.tune.dir}", "combiners.rrf.k=range(1,50)",
         "retriever.weights=interval(0,1)", "tune.trials=5", "tune.folds=2"]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "config key 'tune.dir'" in err and "another plan" in err, err


def test_space_keys_under_plugin_nodes_are_accepted() -> None:
    from retrieval_bench.config.compose import compose_dict

    base = compose_dict([])
    space = build_space({"arms.bm25.b": "interval(0.1,0.9)"}, base, ["bm25", "dense"], [])
    assert space.keys == ["arms.bm25.b"]
