"""The integer core (rankings and labels as codes) against the string path and trec_eval.

A job scores its pipeline's passage indices through `build_ranked_grades_coded`; TREC runs and
any string rankings go through `build_ranked_grades`. Both must give identical numbers, and the
integer core must refuse a ranking that holds a code twice, as the string path does.
"""

from __future__ import annotations

import numpy as np
import pytest
import pytrec_eval
from conftest import built_combiners, compiled_or_numpy
from support.fakes import ScriptedArm
from support.random_cases import CODE, Qrels, Run, coded, random_answer, random_case

from retrieval_bench.config import RetrieverConfig
from retrieval_bench.config.filters import FilterConfig
from retrieval_bench.data.trec import trec_order
from retrieval_bench.job.filters import PassageFilter
from retrieval_bench.job.pipeline import Pipeline
from retrieval_bench.records import EvalQuery, ParsedQuery, Passage
from retrieval_bench.routing.rules import Routing, Strategy
from retrieval_bench.scoring import coded_kernel, metrics
from retrieval_bench.scoring import records as scoring_records
from retrieval_bench.scoring.aggregate import (
    CodedLabels,
    per_query_columns,
    per_query_columns_coded,
    score_stage,
    score_stage_coded,
)
from retrieval_bench.scoring.labels import judge, judge_qrels
from retrieval_bench.scoring.metrics import (
    build_ranked_grades,
    build_ranked_grades_coded,
    pad_labels,
    pad_rankings,
)
from retrieval_bench.scoring.records import score_records

CUTOFFS = [1, 2, 3, 5, 10, 20]


@pytest.fixture(autouse=True, params=["compiled", "numpy"])
def coded_pass(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test here runs on both passes over the rankings (scoring/_coded.c and numpy)."""
    return compiled_or_numpy(request, monkeypatch, coded_kernel, "the compiled scoring pass")


def _random_case(seed: int, n_queries: int) -> tuple[Qrels, Run]:
    """The parity tests' random case with labels outside POOL (uncoded) and empty runs."""
    return random_case(seed, n_queries, outside=0.2, returned=(0, 30))


@pytest.mark.parametrize("seed", range(6))
def test_coded_core_equals_string_path(seed: int) -> None:
    qrels, run = _random_case(seed, 300)
    qids = list(run)
    ranked = [[d for d, _ in trec_order(run[q].items())] for q in qids]
    labels = [qrels[q] for q in qids]
    ids, grades = pad_labels(labels, CODE)
    by_string = per_query_columns(ranked, labels, CUTOFFS)
    by_code = per_query_columns_coded(coded(ranked), ids, grades, CUTOFFS)
    assert list(by_string) == list(by_code)
    for name, column in by_string.items():
        assert column.dtype == by_code[name].dtype, name
        assert np.array_equal(column, by_code[name], equal_nan=True), name


def test_coded_grades_layout_equals_string_layout(monkeypatch: pytest.MonkeyPatch) -> None:
    # Tiny chunks: many chunks, each with its own offsets.
    monkeypatch.setattr(metrics, "_CHUNK", 7)
    qrels, run = _random_case(11, 200)
    qids = list(run)
    ranked = [[d for d, _ in trec_order(run[q].items())] for q in qids]
    labels = [qrels[q] for q in qids]
    ids, grades = pad_labels(labels, CODE)
    for k in (1, 4, 30):
        a = build_ranked_grades(ranked, labels, k)
        b = build_ranked_grades_coded(coded(ranked), ids, grades, k)
        for field in a.__dataclass_fields__:
            assert np.array_equal(getattr(a, field), getattr(b, field)), (k, field)


def test_many_labels_and_int32_input() -> None:
    rng = np.random.default_rng(5)
    labels = [
        {f"d{i}": int(rng.integers(0, 4)) for i in rng.choice(3000, 2500, replace=False)},
        {"d1": 1},
        {},
    ]
    code = {f"d{i}": i for i in range(3000)}
    ranked = [[f"d{i}" for i in rng.permutation(3000)[:200]] for _ in labels]
    rankings = pad_rankings([np.array([code[d] for d in r], dtype=np.int32) for r in ranked])
    ids, grades = pad_labels(labels, code)
    by_string = per_query_columns(ranked, labels, [10, 200])
    by_code = per_query_columns_coded(rankings.astype(np.int32), ids, grades, [10, 200])
    for name, column in by_string.items():
        assert np.array_equal(column, by_code[name], equal_nan=True), name


def test_coded_core_matches_trec_eval() -> None:
    qrels, run = _random_case(21, 500)
    judgements = judge_qrels(qrels)
    scored = [q for q in judgements.qrels if q in run]
    ranked = [[d for d, _ in trec_order(run[q].items())] for q in scored]
    ids, grades = pad_labels([judgements.qrels[q] for q in scored], CODE)
    ours = per_query_columns_coded(coded(ranked), ids, grades, CUTOFFS)
    cuts = ",".join(map(str, CUTOFFS))
    measures = {f"recall.{cuts}", f"P.{cuts}", f"success.{cuts}", f"ndcg_cut.{cuts}"}
    theirs = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    names = {"recall": "recall_{}", "precision": "P_{}", "hit": "success_{}"}
    names["ndcg"] = "ndcg_cut_{}"
    for i, q in enumerate(scored):
        for k in CUTOFFS:
            for mine, their in names.items():
                ref = theirs[q][their.format(k)]
                assert ours[f"{mine}@{k}"][i] == pytest.approx(ref, abs=1e-9), (q, mine, k)


def test_score_stage_coded_is_score_stage() -> None:
    qrels, run = _random_case(3, 400)
    judgements = judge_qrels(qrels, {q: f"t{i % 3}" for i, q in enumerate(qrels)})
    rankings = {q: [d for d, _ in trec_order(docs.items())] for q, docs in run.items()}
    rankings["unlabelled"] = ["d1", "d2"]
    coded = {q: np.array([CODE[d] for d in r], dtype=np.int64) for q, r in rankings.items()}
    group_by = {"half": {q: str(i % 2) for i, q in enumerate(qrels)}}
    labels = CodedLabels.build(judgements, CODE)
    expected = score_stage(rankings, judgements, CUTOFFS, group_by)
    assert score_stage_coded(coded, judgements, labels, CUTOFFS, group_by) == expected


def test_coded_duplicates_and_bad_padding_are_errors() -> None:
    ids, grades = pad_labels([{"d1": 1}, {"d2": 1}], CODE)
    twice = np.array([[1, 2, 3], [4, 5, 4]])
    with pytest.raises(ValueError, match=r"ranking #1.*code 4 more than once"):
        build_ranked_grades_coded(twice, ids, grades, 2)  # the duplicate lies past k
    gap = np.array([[1, -1, 3], [4, 5, -1]])
    with pytest.raises(ValueError, match=r"ranking #0.*padding"):
        build_ranked_grades_coded(gap, ids, grades, 3)
    # Unchecked, a duplicate is not looked for: only for rankings unique by construction.
    build_ranked_grades_coded(twice, ids, grades, 2, check=False)
    dup_labels = np.array([[1, 1], [2, -1]])
    with pytest.raises(ValueError, match=r"labels #0"):
        build_ranked_grades_coded(twice[:, :2], dup_labels, np.ones_like(dup_labels), 2)


@pytest.mark.parametrize("scored", [True, False])
def test_score_stage_coded_names_the_query_with_a_duplicate(scored: bool) -> None:
    judgements = judge_qrels({"a": {"d0": 1}, "qdup": {"d1": 1 if scored else 0}})
    labels = CodedLabels.build(judgements, CODE)
    rankings = {"a": np.array([0]), "qdup": np.array([1, 2, 3, 2])}
    with pytest.raises(ValueError, match=r"'qdup'.*code 2 more than once"):
        score_stage_coded(rankings, judgements, labels, [2])


def test_empty_batches() -> None:
    empty = np.zeros((0, 0), dtype=np.int64)
    rg = build_ranked_grades_coded(empty, empty, empty, 5)
    assert rg.grades.shape == (0, 5)
    assert pad_rankings([]).shape == (0, 0)
    one = build_ranked_grades_coded(np.full((1, 3), -1), np.array([[7]]), np.array([[2]]), 3)
    assert one.lengths.tolist() == [0] and one.n_relevant.tolist() == [1]


def test_job_scores_indices_as_it_would_score_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(9)
    passages = [Passage(f"p{i:03d}", "text") for i in range(60)]
    queries = [
        EvalQuery(
            f"q{i}",
            "text",
            f"t{i % 2}",
            "reviewed" if i % 7 else "unreviewed",
            {f"p{j:03d}": int(rng.integers(0, 3)) for j in rng.choice(60, 5, replace=False)},
        )
        for i in range(80)
    ]
    strategy = Strategy("hybrid", ("a", "b"))
    pipeline = Pipeline(
        passages,
        {
            "a": ScriptedArm("a", answer=random_answer(1, 60)),
            "b": ScriptedArm("b", answer=random_answer(2, 60)),
        },
        parse=lambda text: ParsedQuery(),
        passage_filter=PassageFilter(passages, FilterConfig()),
        route=lambda q, p: Routing(None, strategy),
        pool_size=20,
        top_k=8,
        combiners=built_combiners(RetrieverConfig()),
        baselines={"a": Strategy("a", ("a",))},
    )
    records = pipeline.run(queries)
    judgements = judge(queries, {p.id for p in passages})
    by_ids = score_records(records, judgements, [3, 8])

    def no_strings(*args: object, **kwargs: object) -> None:
        raise AssertionError("the job path scored id strings")

    monkeypatch.setattr(scoring_records, "score_stage", no_strings)
    by_indices = score_records(records, judgements, [3, 8], passage_ids=[p.id for p in passages])
    assert set(by_ids["stages"]) == {"a", "b", "fused", "final"}
    assert by_indices == by_ids


def test_unchecked_duplicate_matches_as_numpy_does() -> None:
    """check=False on a ranking holding a labelled code twice (only rankings unique by
    construction may skip the check): both passes keep both matches."""
    rg = build_ranked_grades_coded(np.array([[1, 1]]), np.array([[1]]), np.array([[1]]), 2, False)
    assert rg.rank.tolist() == [0, 1] and rg.row.tolist() == [0, 0]
