"""router=learned on a generated set where routing is learnable: BM25 ranks the `pair` queries'
passages first, a scripted second arm ranks the `deep` queries' passage first and says so with
a high top score. The held-out router learns it (each fold from the other's labels), records
its features and choices, saves a router that routes alike when applied to another job, takes
the fallback for a query an arm returned nothing for, and refuses what it cannot learn from."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import compose_config, config_record
from support.fakes import ScriptedArm
from support.synth_dataset import write_synthetic

from retrieval_bench.errors import ConfigError, DataError
from retrieval_bench.job.runner import run_job
from retrieval_bench.jobdir import names
from retrieval_bench.jobdir.files import read_rankings, read_router
from retrieval_bench.jobdir.write import write_job
from retrieval_bench.records import EvalQuery, Ranked

pytestmark = pytest.mark.slow  # whole jobs in process

EMPTY_FOR = "q003"  # the scripted arm returns nothing for this query: it takes the fallback
FAST = [
    "router=learned",
    "router.ceiling_folds=2",
    "~router.estimators.forest",
    "router.estimators.ridge=[1.0]",
    "router.margins=[0.0]",
    "cost.latency_queries=2",
]


def deep_first(queries: Sequence[EvalQuery], k: int, allowed: Sequence[Any]) -> list[Ranked]:
    """Topic i's passages are 3i (a), 3i+1 (b), 3i+2 (c). `deep` queries: c first, scored
    0.9; `pair` queries: c first too (wrong for them), scored 0.5."""
    out = []
    for query, mask in zip(queries, allowed, strict=True):
        i = int(query.query_id[1:])
        if query.query_id == EMPTY_FOR:
            out.append(Ranked(np.empty(0, dtype=np.int64), np.empty(0), k))
            continue
        order = [3 * i + 2, 3 * i + 1, 3 * i]
        order = [p for p in order if mask is None or mask[p]][:k]
        top = 0.9 if query.query_type == "deep" else 0.5
        scores = np.array([top, top - 0.3, top - 0.35][: len(order)])
        out.append(Ranked(np.array(order, dtype=np.int64), scores, k))
    return out


def learned_job(tmp_path: Path, *extra: str, folder: str = "job") -> tuple[Any, Path]:
    dataset = write_synthetic(tmp_path / "data", per_type=10)
    cfg = compose_config([*dataset, f"cache_dir={tmp_path / 'cache'}", *FAST, *extra])
    result = run_job(cfg, arms={"dense": ScriptedArm("dense", answer=deep_first)})
    return result, write_job(tmp_path / folder, result, config_record(cfg))


@pytest.fixture(scope="module")
def learned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    return learned_job(tmp_path_factory.mktemp("learned"))


def test_the_held_out_router_learns_which_arm_each_query_needs(learned: Any) -> None:
    result, _ = learned
    table = result.metrics["learned_router"]["table"]
    # bm25 is the best candidate on pair queries, the scripted arm on deep ones; routing on the
    # arm's top score (each fold learned from the other's labels) reaches the oracle.
    overall = table["overall"]
    assert overall["best_single_name"] == "hybrid"
    assert overall["learned"] == pytest.approx(overall["oracle"])
    assert overall["learned"] > overall["best_single"] + 0.1
    assert overall["captured"] == pytest.approx(1.0)
    chosen = {r.query.query_id: r.strategy for r in result.records}
    deep = [q for q, t in result.judgements.query_types.items() if t == "deep"]
    assert all(chosen[q] == "dense" for q in deep)


def test_every_query_records_its_features_choice_and_comparisons(learned: Any) -> None:
    result, folder = learned
    learned_router = result.metrics["learned_router"]
    records = read_rankings(folder)
    for record in records:
        assert record.features is not None and "dense.top" in record.features
        assert {"bm25", "dense", "hybrid", "rules"} <= set(record.baselines)
        assert record.rule is not None and record.rule.startswith(("learned: fold", "fallback"))
    assert learned_router["estimate"] == "held_out"
    assert [f["test"] for f in learned_router["folds"]] == [10, 9]  # q003 has no features
    assert set(learned_router["tests"]) >= {"rrf", "rules", "correction"}
    assert learned_router["tests"]["rrf"]["all"]["n"] == 20


def test_a_query_an_arm_returned_nothing_for_takes_the_fallback(learned: Any) -> None:
    result, folder = learned
    record = next(r for r in result.records if r.query.query_id == EMPTY_FOR)
    assert record.strategy == "hybrid"
    assert record.rule == "fallback: no dense.top (+8 more)"
    assert record.features is not None and record.features["dense.top"] is None
    fallback = result.metrics["learned_router"]["fallback"]
    assert fallback["n"] == 1 and EMPTY_FOR in fallback["queries"]
    assert "Fallback: 1 queries" in (folder / names.REPORT_MD).read_text(encoding="utf-8")


def test_the_saved_router_routes_another_job_as_it_routes_the_features(
    learned: Any, tmp_path: Path
) -> None:
    _, folder = learned
    saved = read_router(folder)
    assert saved.trained_on["queries"] == 19
    applied, applied_folder = learned_job(tmp_path, f"router.model={folder / names.ROUTER_MODEL}")
    assert not (applied_folder / names.ROUTER_MODEL).exists()
    section = applied.metrics["learned_router"]
    assert section["estimate"] == "applied" and section["seen"] == 19
    for record in applied.records:
        if record.query.query_id == EMPTY_FOR:
            continue
        assert record.features is not None
        x = np.array([[record.features[f] for f in saved.features]])
        assert record.strategy == saved.candidates[int(saved.choose(x)[0])].name
        assert record.rule == "learned: saved router"


def test_a_saved_router_counts_as_seen_only_the_queries_it_was_trained_on(
    learned: Any, tmp_path: Path
) -> None:
    """Another set that reuses the ids (a BEIR set's "0", "1", ... recur in every other set):
    a query is in the router's training set when its id and its text are, so the changed
    queries' figures are held out, not reported in-sample."""
    _, folder = learned
    dataset = write_synthetic(tmp_path / "data", per_type=10)
    evalset = Path(dataset[2].split("=", 1)[1])
    lines = [json.loads(line) for line in evalset.read_text(encoding="utf-8").splitlines()]
    other = [{**q, "query": q["query"] + " 价格"} if i % 2 else q for i, q in enumerate(lines)]
    evalset.write_text("\n".join(json.dumps(q) for q in other) + "\n", encoding="utf-8")
    model = f"router.model={folder / names.ROUTER_MODEL}"
    cfg = compose_config([*dataset, f"cache_dir={tmp_path / 'cache'}", *FAST, model])
    result = run_job(cfg, arms={"dense": ScriptedArm("dense", answer=deep_first)})
    # trained on 19 (q003 had no features); the 10 odd ones changed, the 10 even ones did not
    assert result.metrics["learned_router"]["seen"] == 10


def test_a_saved_router_of_another_job_is_refused_naming_what_differs(
    learned: Any, tmp_path: Path
) -> None:
    _, folder = learned
    saved = folder / names.ROUTER_MODEL
    with pytest.raises(ConfigError, match=r"router\.model.*candidates \['bm25', 'dense', 'hybri"):
        learned_job(tmp_path, f"router.model={saved}", "router.candidates=[bm25,dense]")
    document = json.loads(saved.read_text(encoding="utf-8"))
    document["features"][0] = "query.length"
    other = tmp_path / "other.json"
    other.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"lacks \['query.length'\] and adds \['query.chars'\]"):
        learned_job(tmp_path, f"router.model={other}")
    other.write_text("{}", encoding="utf-8")
    with pytest.raises(DataError, match=r"other\.json: not a saved router"):
        learned_job(tmp_path, f"router.model={other}")
    with pytest.raises(ConfigError, match=r"router\.model.*no such file"):
        learned_job(tmp_path, f"router.model={tmp_path / 'absent.json'}")


def test_too_few_labelled_queries_or_none_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"needs at least 21 labelled queries.*has 19 of 20"):
        learned_job(tmp_path, "router.ceiling_folds=7")
    dataset = write_synthetic(tmp_path / "data", per_type=10)
    evalset = Path(dataset[2].split("=", 1)[1])
    lines = [json.loads(line) for line in evalset.read_text(encoding="utf-8").splitlines()]
    unlabelled = [{**q, "label_status": "unreviewed"} for q in lines]
    evalset.write_text("\n".join(json.dumps(q) for q in unlabelled) + "\n", encoding="utf-8")
    cfg = compose_config([*dataset, f"cache_dir={tmp_path / 'cache'}", *FAST])
    with pytest.raises(ConfigError, match="no labelled query of dataset 'synth' to learn from"):
        run_job(cfg, arms={"dense": ScriptedArm("dense", answer=deep_first)})
