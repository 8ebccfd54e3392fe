"""Typos never pass silently: unknown config keys (with or without `+`), unknown record fields,
a pool smaller than top_k, a top_k larger than the corpus (issue 9, item 4)."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import (
    FIXTURE,
    compose_config,
    mini_overrides,
    run_app,
    run_in_process,
    shared_benchmark,
)
from hydra.errors import ConfigCompositionException
from support.datasets import make_beir, write_jsonl

from retrieval_bench.config import RunConfig, nearest_key
from retrieval_bench.config.bm25 import BM25_IMPLS, BM25Config
from retrieval_bench.data.beir import load_beir
from retrieval_bench.data.evalset import load_evalset
from retrieval_bench.data.passages import load_lexicon, load_passages
from retrieval_bench.errors import ConfigError, DataError
from retrieval_bench.job.check import check_config
from retrieval_bench.job.contract import StageContract
from retrieval_bench.job.runner import run_job
from retrieval_bench.records import EvalQuery, Ranked, UnjudgedQuery
from retrieval_bench.retrievers.bm25 import BM25Retriever
from retrieval_bench.scoring.labels import judge
from retrieval_bench.tiebreak import shared_tie_break


def typed(overrides: list[str]) -> RunConfig:
    """The composed config before validation: each test validates it itself."""
    return compose_config(overrides, check=False)


# One misspelt key per config node; `+` (append) and `++` (force-add) both open the node.
APPENDED = [
    ("+retriever.poolsize=5", "retriever.poolsize", "did you mean 'retriever.pool_size'?"),
    ("++retriever.poolsize=5", "retriever.poolsize", "did you mean 'retriever.pool_size'?"),
    ("+top_kk=3", "top_kk", "did you mean 'top_k'?"),
    ("+dataset.splt=dev", "dataset.splt", "did you mean 'dataset.split'?"),
    ("+encoder.modle=x", "encoder.modle", "did you mean 'encoder.model'?"),
    ("+router.default_rout=x", "router.default_rout", "did you mean 'router.default_route'?"),
    ("+bm25.epsiln=0.1", "bm25.epsiln", "did you mean 'bm25.epsilon'?"),
    ("+dense.nprob=3", "dense.nprob", "did you mean 'dense.nprobe'?"),
    ("+text.hm=false", "text.hm", "did you mean 'text.hmm'?"),
    ("+filters.cty=false", "filters.cty", "did you mean 'filters.city'?"),
    ("+scoring.cutof=[3]", "scoring.cutof", "did you mean 'scoring.cutoffs'?"),
    ("+refusal.stage=final", "refusal.stage", "did you mean 'refusal.score_stage'?"),
    ("+compare.alpah=0.1", "compare.alpah", "did you mean 'compare.alpha'?"),
    ("+benchmark.gate.alpah=0.1", "benchmark.gate.alpah", "did you mean 'benchmark.gate.alpha'?"),
    ("+dataset.zzz=1", "dataset.zzz", "known: name, format, corpus, evalset, path"),
]


@pytest.mark.parametrize(("override", "key", "hint"), APPENDED)
def test_an_appended_unknown_key_is_refused_naming_the_nearest(
    override: str, key: str, hint: str
) -> None:
    cfg = typed([override])
    with pytest.raises(ConfigError) as caught:
        check_config(cfg)
    assert caught.value.key == key
    assert str(caught.value).startswith(f"config key '{key}': unknown key; {hint}")


def test_unknown_keys_inside_mappings_and_lists_of_typed_nodes() -> None:
    cfg = typed(["router=rules", "+router.routes.default.stratgy=hybrid"])
    with pytest.raises(
        ConfigError, match=re.escape("did you mean 'router.routes.default.strategy'")
    ):
        check_config(cfg)
    cfg = typed(["router=rules", "+router.rules.0.when.min_entitys=1"])
    with pytest.raises(
        ConfigError, match=re.escape("did you mean 'router.rules[0].when.min_entities'")
    ):
        check_config(cfg)


def test_an_unknown_key_without_plus_is_refused_by_hydra_and_has_a_nearest_name() -> None:
    with pytest.raises(ConfigCompositionException, match=re.escape("retriever.poolsize")):
        typed(["retriever.poolsize=5"])
    assert nearest_key("retriever.poolsize") == "retriever.pool_size"
    assert nearest_key("benchmark.gate.alpah") == "benchmark.gate.alpha"
    assert nearest_key("retriever.zzzzzz") is None
    assert nearest_key("benchmark.gate.tolerances.recall@K") is None  # a free-form mapping


def test_shipped_configs_and_presets_validate() -> None:
    for overrides in (
        [],
        ["retriever=bm25"],
        ["retriever=dense"],
        ["router=rules"],
        ["dataset=policy"],
        ["experiment=monthly"],
        ["experiment=topk_ablation", "top_k=8"],  # the sweep's largest top_k
    ):
        check_config(typed(overrides))


def test_a_pool_smaller_than_top_k_is_refused() -> None:
    with pytest.raises(ConfigError) as caught:
        check_config(typed(["retriever.pool_size=2", "top_k=6"]))
    assert caught.value.key == "retriever.pool_size"
    assert "2 is smaller than top_k=6" in str(caught.value)
    check_config(typed(["retriever.pool_size=6", "top_k=6"]))


def test_top_k_larger_than_the_corpus_is_refused_at_load(tmp_path: Path) -> None:
    overrides = [*mini_overrides(tmp_path), "retriever=bm25", "top_k=13", "retriever.pool_size=13"]
    cfg = typed(overrides)
    check_config(cfg)
    with pytest.raises(ConfigError) as caught:
        run_job(cfg)
    assert caught.value.key == "top_k"
    assert "13 is larger than the corpus of dataset 'mini' (12 passages)" in str(caught.value)
    assert len((FIXTURE / "corpus" / "mini" / "passages.jsonl").read_text().splitlines()) == 12


@pytest.mark.slow
def test_app_exits_2_on_an_appended_typo(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = run_app([*mini_overrides(tmp_path), "+retriever.poolsize=5", f"hydra.run.dir={run_dir}"])
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "config key 'retriever.poolsize': unknown key; did you mean 'retriever.pool_size'?" in (
        proc.stderr
    )
    assert not (run_dir / "metrics.json").exists()


# --- record fields -------------------------------------------------------------------------

QUERY = {
    "query_id": "q1",
    "query": "日月湾冲浪",
    "query_type": "entity_exact",
    "label_status": "reviewed",
    "relevant_ids": ["a"],
}


def test_a_misspelt_evalset_field_names_file_line_and_nearest(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "e.jsonl",
        [QUERY, {**QUERY, "query_id": "q2", "expected_entites": ["日月湾"]}],
    )
    with pytest.raises(DataError) as caught:
        load_evalset(path)
    assert str(caught.value) == (
        f"{path}:2: unknown field 'expected_entites'; did you mean 'expected_entities'?"
    )


def test_free_form_meta_and_notes_stay_allowed(tmp_path: Path) -> None:
    evalset = write_jsonl(
        tmp_path / "e.jsonl", [{**QUERY, "notes": "checked", "meta": {"annotator": "x"}}]
    )
    assert load_evalset(evalset)[0].notes == "checked"
    passages = write_jsonl(
        tmp_path / "p.jsonl", [{"id": "a", "text": "x", "notes": "n", "meta": {"anything": 1}}]
    )
    assert load_passages(passages)[0].meta == {"anything": 1}


@pytest.mark.parametrize(
    ("name", "record", "field", "hint"),
    [
        ("p.jsonl", {"id": "a", "txt": "x"}, "txt", "did you mean 'text'?"),
        ("p.jsonl", {"id": "a", "text": "x", "docid": "d"}, "docid", "did you mean 'doc_id'?"),
        ("lexicon.jsonl", {"name": "甲", "alias": ["乙"]}, "alias", "did you mean 'aliases'?"),
        ("lexicon.jsonl", {"name": "甲", "zzz": 1}, "zzz", "known: name, aliases"),
    ],
)
def test_unknown_passage_and_lexicon_fields(
    tmp_path: Path, name: str, record: dict, field: str, hint: str
) -> None:
    path = write_jsonl(tmp_path / name, [record])
    loader = load_lexicon if name == "lexicon.jsonl" else load_passages
    with pytest.raises(DataError, match=re.escape(f"{path}:1: unknown field '{field}'; {hint}")):
        loader(path)


def test_unknown_beir_fields_name_file_and_line(tmp_path: Path) -> None:
    root = make_beir(tmp_path / "toy")
    with (root / "queries.jsonl").open("a") as handle:
        handle.write(json.dumps({"_id": "q4", "text": "x", "metdata": {}}) + "\n")
    with pytest.raises(DataError) as caught:
        load_beir(root)
    assert str(caught.value) == (
        f"{root / 'queries.jsonl'}:4: unknown field 'metdata'; did you mean 'metadata'?"
    )
    root = make_beir(tmp_path / "toy2")
    with (root / "corpus.jsonl").open("a") as handle:
        handle.write(json.dumps({"_id": "d4", "titel": "x", "text": "y"}) + "\n")
    with pytest.raises(DataError, match=re.escape("corpus.jsonl:4: unknown field 'titel'")):
        load_beir(root)


@pytest.mark.parametrize("name", ["scifact", "cmrc2018"])
def test_real_beir_sets_hold_only_known_fields(name: str) -> None:
    dataset = load_beir(shared_benchmark(name))
    assert dataset.unjudged == ()
    assert len(dataset.queries) == {"scifact": 300, "cmrc2018": 1000}[name]


# --- queries the labels do not judge -------------------------------------------------------


def test_beir_queries_without_qrels_are_counted_not_dropped(tmp_path: Path) -> None:
    root = make_beir(tmp_path / "toy")  # q3 is in queries.jsonl, in no qrels file
    with (root / "queries.jsonl").open("a") as handle:
        handle.write(json.dumps({"_id": "q4", "text": "train query"}) + "\n")
    (root / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\nq4\td1\t1\n")
    dataset = load_beir(root)
    assert [q.query_id for q in dataset.queries] == ["q1", "q2"]
    assert dataset.unjudged == (
        UnjudgedQuery("q3", "unknown", "no_qrels"),
        UnjudgedQuery("q4", "unknown", "other_split"),
    )
    judgements = judge(dataset.queries, {p.id for p in dataset.passages}, dataset.unjudged)
    assert set(judgements.qrels) == {"q1", "q2"}
    assert judgements.excluded == {"q3": "no_qrels", "q4": "other_split"}


@pytest.mark.slow
def test_app_reports_beir_queries_without_qrels(tmp_path: Path) -> None:
    root = make_beir(tmp_path / "toy")
    run_dir = tmp_path / "run"
    proc = run_app(
        [
            "dataset=beir",
            f"dataset.path={root}",
            "retriever=bm25",
            "top_k=3",
            f"cache_dir={tmp_path / 'cache'}",
            f"hydra.run.dir={run_dir}",
        ]
    )
    assert proc.returncode == 0, proc.stderr
    final = json.loads((run_dir / "metrics.json").read_text())["stages"]["final"]
    assert final["counts"]["scored"] == 2
    assert final["counts"]["excluded"] == {"no_qrels": 1}
    assert final["excluded_queries"] == {"q3": "no_qrels"}
    assert "excluded: no_qrels 1" in (run_dir / "report.md").read_text()
    ranked = [json.loads(line)["query_id"] for line in (run_dir / "rankings.jsonl").open()]
    assert ranked == ["q1", "q2"]


# --- empty rankings say why ----------------------------------------------------------------


@pytest.mark.parametrize("impl", BM25_IMPLS)
def test_bm25_empty_pools_carry_their_reason(impl: str) -> None:
    ids = ["a", "b", "c"]
    corpus = [["sun", "star"], ["cat", "mammal"], ["moon", "earth"]]
    retriever = BM25Retriever(ids, corpus, str.split, BM25Config(impl=impl))
    only_b = np.array([False, True, False])
    found, blank, unknown, filtered = retriever.search(
        ["sun", "   ", "zebra", "sun"], 3, [None, None, None, only_b]
    )
    assert found.indices.tolist() == [0] and found.empty_reason is None
    assert (blank.returned, blank.empty_reason) == (0, "no_query_terms")
    assert (unknown.returned, unknown.empty_reason) == (0, "no_matching_terms")
    assert (filtered.returned, filtered.empty_reason) == (0, "filtered_out")


@pytest.fixture(scope="module")
def empty_query_job(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """The mini set plus a query of only punctuation and one of terms the corpus lacks."""
    tmp = tmp_path_factory.mktemp("empty")
    lines = (FIXTURE / "evalsets" / "mini.jsonl").read_text(encoding="utf-8").splitlines()
    extra = [
        {**QUERY, "query_id": "p01", "query": "？！……", "relevant_ids": ["sy-wzz-tickets"]},
        {**QUERY, "query_id": "p02", "query": "zzqx", "relevant_ids": ["sy-wzz-tickets"]},
    ]
    evalset = tmp / "mini.jsonl"
    evalset.write_text(
        "\n".join([*lines, *(json.dumps(q, ensure_ascii=False) for q in extra)]) + "\n",
        encoding="utf-8",
    )
    overrides = [*mini_overrides(tmp), f"dataset.evalset={evalset}", "retriever=bm25"]
    _, job_dir = run_in_process(overrides, tmp)
    return job_dir, json.loads((job_dir / "metrics.json").read_text())


def test_empty_rankings_are_counted_per_stage_with_their_reason(empty_query_job) -> None:
    _, metrics = empty_query_job
    for stage in ("bm25", "final"):
        counts = metrics["stages"][stage]["counts"]
        # p02, and the fixture's m07 and m08 (no_answer, unreviewed: ranked, not scored).
        assert counts["empty_rankings"] == {"no_matching_terms": 3, "no_query_terms": 1}
        # Still scored (0): the system was asked and returned nothing.
        assert metrics["stages"][stage]["per_query"]["p01"]["recall@6"] == 0.0


def test_empty_rankings_name_their_reason_in_rankings_and_report(empty_query_job) -> None:
    job_dir, _ = empty_query_job
    records = {r["query_id"]: r for r in map(json.loads, (job_dir / "rankings.jsonl").open())}
    assert records["p01"]["stages"]["bm25"]["empty_reason"] == "no_query_terms"
    assert records["p01"]["stages"]["final"]["empty_reason"] == "no_query_terms"
    assert records["p02"]["stages"]["final"]["empty_reason"] == "no_matching_terms"
    assert records["m07"]["stages"]["final"]["empty_reason"] == "no_matching_terms"
    assert "empty_reason" not in records["m01"]["stages"]["final"]
    assert (
        "empty rankings: no_matching_terms 3, no_query_terms 1"
        in (job_dir / "report.md").read_text()
    )


def test_a_fused_stage_is_empty_only_when_every_arm_is() -> None:
    from retrieval_bench.fusion import ReciprocalRankFusion
    from retrieval_bench.job.pipeline import Pipeline
    from retrieval_bench.routing.rules import Strategy

    empty = Ranked(np.empty(0, np.int64), np.empty(0), 10, "no_query_terms")
    other = Ranked(np.array([1]), np.array([0.5]), 10)
    pipeline = Pipeline.__new__(Pipeline)
    pipeline.combiners = {"rrf": ReciprocalRankFusion(60)}
    pipeline.tie_break = shared_tie_break(["a", "b"])
    hybrid = Strategy("hybrid", ("bm25", "dense"))
    pipeline.contract = StageContract(["a", "b"], pipeline.tie_break)
    query = EvalQuery("q", "query", "t", "reviewed")
    assert pipeline._combine(query, hybrid, [empty, other], None).indices.tolist() == [1]
    both = pipeline._combine(
        query, hybrid, [empty, replace(empty, empty_reason="filtered_out")], None
    )
    assert (both.returned, both.empty_reason) == (0, "no_query_terms+filtered_out")


def test_a_misspelt_key_in_a_router_rules_file_names_the_nearest(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("routes:\n  default: {stratgy: hybrid}\n", encoding="utf-8")
    cfg = typed(["router=rules", f"router.rules_file={rules}"])
    with pytest.raises(DataError) as caught:
        check_config(cfg)
    assert str(caught.value) == (
        f"{rules}: routes.default.stratgy: Key 'stratgy' not in 'RouteConfig'; "
        "did you mean 'routes.default.strategy'?"
    )
