"""A job's TREC export scores like the job: `run.score ... --complete` equals metrics.json.

A query a stage ranked nothing for cannot appear in a TREC run, yet metrics.json scores it 0.
The jobs here hold two such queries for BM25 ("zzqx": no term of the corpus; "？！": only
punctuation), so every BM25-fed stage has empty rankings (rankings.jsonl: `empty_reason`).
Each stage (and each router baseline) is re-scored from its files by `run.score --complete`
and, independently, by pytrec_eval (trec_eval's code) with the missing labelled queries
counted as 0, as trec_eval's `-c` does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest
import pytrec_eval
from conftest import FIXTURE, compose_config, config_record

from retrieval_bench.data.trec import read_qrels, read_run
from retrieval_bench.job.runner import run_job
from retrieval_bench.jobdir.write import write_job
from retrieval_bench.scoring.aggregate import metric_names
from run.score import SCORED_ZERO, main

TOP_K = 6
NO_TERM = {"query_id": "m10", "query": "zzqx", "query_type": "fuzzy_intent"}
PUNCTUATION = {"query_id": "m11", "query": "？！", "query_type": "entity_exact"}
EMPTY_FOR_BM25 = ["m10", "m11"]
# Entity-exact queries answered by BM25 alone: the dense and fused stages skip them.
BM25_ONLY_RULES = "strategies:\n  bm25_first: {arms: [bm25], combine: rrf}\n"


def _evalset(tmp: Path) -> Path:
    lines = (FIXTURE / "evalsets" / "mini.jsonl").read_text(encoding="utf-8").splitlines()
    for extra, relevant in ((NO_TERM, "sy-ylw-beach"), (PUNCTUATION, "sy-wzz-tickets")):
        record = {**extra, "label_status": "reviewed", "relevant_ids": [relevant]}
        lines.append(json.dumps(record, ensure_ascii=False))
    path = tmp / "mini_empty.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _job(tmp: Path, cache: Path, overrides: list[str]) -> Path:
    base = [
        "dataset.name=mini",
        f"dataset.corpus={FIXTURE / 'corpus' / 'mini'}",
        f"dataset.evalset={_evalset(tmp)}",
        f"cache_dir={cache}",
        f"top_k={TOP_K}",
    ]
    cfg = compose_config(base + overrides)
    return write_job(tmp / "job", run_job(cfg), config_record(cfg))


# Per job: the stages that ran only some labelled queries, so carry their own qrels.
JOBS = {"bm25": set(), "router": set(), "router_partial": {"stages.dense", "stages.fused"}}


class Job(NamedTuple):
    kind: str
    path: Path


@pytest.fixture(scope="module", params=list(JOBS))
def job(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, shared_cache: Path
) -> Job:
    tmp = tmp_path_factory.mktemp(request.param)
    overrides = {"bm25": ["retriever=bm25"], "router": ["router=rules"]}.get(request.param)
    if overrides is None:
        rules = tmp / "rules.yaml"
        rules.write_text(BM25_ONLY_RULES, encoding="utf-8")
        overrides = ["router=rules", f"router.rules_file={rules}"]
    return Job(request.param, _job(tmp, shared_cache, overrides))


def _exports(job: Path) -> list[tuple[str, dict[str, Any], Path, Path]]:
    """(name, its metrics.json entry, qrels file, run file) for every stage and baseline."""
    metrics = json.loads((job / "metrics.json").read_text())
    out = []
    for kind, folder in (("stages", job / "trec"), ("baselines", job / "trec" / "baselines")):
        for name, stage in metrics.get(kind, {}).items():
            own = folder / f"{name}.qrels"
            qrels = own if own.exists() else job / "qrels.trec"
            out.append((f"{kind}.{name}", stage, qrels, folder / f"{name}.run"))
    return out


def _empty(job: Path) -> dict[str, list[str]]:
    """Per stage and baseline, the queries whose ranking is empty (rankings.jsonl)."""
    empty: dict[str, list[str]] = {}
    for line in (job / "rankings.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        for kind in ("stages", "baselines"):
            for name, stage in record[kind].items():
                names = empty.setdefault(f"{kind}.{name}", [])
                if not stage["ids"]:
                    assert stage["empty_reason"], (record["query_id"], name)
                    names.append(record["query_id"])
    return empty


def test_empty_rankings_are_recorded_per_stage(job: Job) -> None:
    empty = _empty(job.path)
    labelled = set(read_qrels(job.path / "qrels.trec"))
    assert [q for q in empty["stages.bm25"] if q in labelled] == EMPTY_FOR_BM25
    own_qrels = set()
    for name, stage, qrels_path, run_path in _exports(job.path):
        # A stage that ran only some labelled queries (a router's arm) has its own qrels.
        if qrels_path.name != "qrels.trec":
            own_qrels.add(name)
            assert set(read_qrels(qrels_path)) == set(stage["per_query"]), name
        assert (name in own_qrels) == ("not_in_run" in stage["counts"]["excluded"]), name
        # An empty ranking is absent from the run file, and scored (as 0) in metrics.json.
        assert not set(empty[name]) & set(read_run(run_path)), name
        assert sum(stage["counts"]["empty_rankings"].values()) == len(empty[name]), name
        for qid in set(empty[name]) & set(stage["per_query"]):
            assert stage["per_query"][qid][f"ndcg@{TOP_K}"] == 0.0
    assert own_qrels == JOBS[job.kind]


def test_complete_rescoring_equals_metrics_json_on_every_stage(
    job: Job, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = _empty(job.path)
    exports = _exports(job.path)
    assert len(exports) >= 2
    for name, stage, qrels, run in exports:
        assert main([str(qrels), str(run), "-k", str(TOP_K), "--complete", "--json"]) == 0
        captured = capsys.readouterr()
        assert captured.err == "", name
        rescored = json.loads(captured.out)
        # Every doc metric (the families merged into metrics.json's overall are not TREC's).
        assert set(rescored["overall"]) == {"n", *metric_names([TOP_K])}
        for metric, value in rescored["overall"].items():
            assert value == pytest.approx(stage["overall"][metric], abs=1e-12), (name, metric)
        labelled = set(read_qrels(qrels))
        assert rescored["counts"]["scored"] == stage["counts"]["scored"] == len(labelled)
        assert rescored["counts"][SCORED_ZERO] == len(labelled & set(empty[name])), name


def test_without_complete_a_warning_gives_the_missing_count(
    job: Job, capsys: pytest.CaptureFixture[str]
) -> None:
    qrels, run = job.path / "qrels.trec", job.path / "trec" / "bm25.run"
    assert main([str(qrels), str(run), "-k", str(TOP_K)]) == 0
    captured = capsys.readouterr()
    assert "excluded (not_in_run): 2" in captured.out
    assert captured.err.startswith("warning: 2 labelled queries are not in the run")
    assert "--complete" in captured.err


def test_pytrec_eval_with_missing_queries_as_zero_equals_metrics_json(job: Job) -> None:
    """trec_eval -c semantics computed by independent code: pytrec_eval per query, 0 for a
    labelled query the run lacks, the mean over every labelled query."""
    measures = {"ndcg_cut": "ndcg", "recall": "recall", "P": "precision", "success": "hit"}
    for name, stage, qrels_path, run_path in _exports(job.path):
        qrels = read_qrels(qrels_path)
        run = {q: dict(pairs) for q, pairs in read_run(run_path).items()}
        evaluator = pytrec_eval.RelevanceEvaluator(qrels, {f"{m}.{TOP_K}" for m in measures})
        theirs = evaluator.evaluate(run)
        cut = {q: dict(pairs[:TOP_K]) for q, pairs in read_run(run_path).items()}
        rr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(cut)
        for trec_name, ours in measures.items():
            per_query = [theirs.get(q, {}).get(f"{trec_name}_{TOP_K}", 0.0) for q in qrels]
            assert stage["overall"][f"{ours}@{TOP_K}"] == pytest.approx(
                float(np.mean(per_query)), abs=1e-12
            ), (name, ours)
        mrr = [rr.get(q, {}).get("recip_rank", 0.0) for q in qrels]
        assert stage["overall"][f"mrr@{TOP_K}"] == pytest.approx(float(np.mean(mrr)), abs=1e-12)
