"""The learned router's per-query features against hand computations: term statistics, the
pre-retrieval predictors (idf, SCQ, simplified clarity), the score statistics of a pool (NQC,
WIG, gaps), the overlaps of two pools (Jaccard, rank-biased overlap), the parse's counts and
the script mix; an empty pool gives None features, never 0."""

from __future__ import annotations

import math

import numpy as np
import pytest

from retrieval_bench.records import ParsedQuery
from retrieval_bench.routing.features import (
    ARM_FEATURES,
    TERM_FEATURES,
    ArmPool,
    TermStatistics,
    feature_names,
    missing_features,
    pair_features,
    pool_features,
    query_features,
    rank_biased_overlap,
    retrieval_features,
    script_mix,
)

# Three passages: "a b a", "b c", "c c d". N = 3, |C| = 8 tokens.
CORPUS = [["a", "b", "a"], ["b", "c"], ["c", "c", "d"]]


def test_term_statistics_from_tokens_and_from_term_ids_agree() -> None:
    by_lists = TermStatistics.from_tokens(CORPUS)
    assert (by_lists.passages, by_lists.tokens) == (3, 8)
    assert by_lists.df == {"a": 1, "b": 2, "c": 2, "d": 1}
    assert by_lists.cf == {"a": 2, "b": 2, "c": 3, "d": 1}
    vocab = ["a", "b", "c", "d"]
    ids = np.array([0, 1, 0, 1, 2, 2, 2, 3])
    by_ids = TermStatistics.from_term_ids(vocab, ids, np.array([3, 2, 3]))
    assert by_ids == by_lists


def test_pre_retrieval_predictors_by_hand() -> None:
    stats = TermStatistics.from_tokens(CORPUS)
    # Query "a c c x": x is not in the corpus (oov 1/4); known tokens a, c, c (|q| = 3).
    got = stats.term_features(["a", "c", "c", "x"])
    idf_a, idf_c = math.log(3 / 1), math.log(3 / 2)
    scq_a = (1 + math.log(2)) * math.log(1 + 3 / 1)
    scq_c = (1 + math.log(3)) * math.log(1 + 3 / 2)
    # SCS = 1/3 log2((1/3) / (2/8)) + 2/3 log2((2/3) / (3/8))
    clarity = (1 / 3) * math.log2((1 / 3) / (2 / 8)) + (2 / 3) * math.log2((2 / 3) / (3 / 8))
    assert got["terms.oov"] == pytest.approx(0.25)
    assert got["terms.max_idf"] == pytest.approx(idf_a)
    assert got["terms.mean_idf"] == pytest.approx((idf_a + idf_c) / 2)
    assert got["terms.max_scq"] == pytest.approx(max(scq_a, scq_c))
    assert got["terms.sum_scq"] == pytest.approx(scq_a + scq_c)
    assert got["terms.mean_scq"] == pytest.approx((scq_a + scq_c) / 2)
    assert got["terms.clarity"] == pytest.approx(clarity)


def test_a_query_of_unknown_terms_has_no_idf_but_a_full_oov_share() -> None:
    got = TermStatistics.from_tokens(CORPUS).term_features(["x", "y"])
    assert got["terms.oov"] == 1.0
    assert missing_features(got) == [f for f in TERM_FEATURES if f != "terms.oov"]


def test_pool_statistics_by_hand() -> None:
    # Pool 10, 8, 5, 3, 2, 2 at depth 3: top 3 = 10, 8, 5; pool mean s_D = 30/6 = 5.
    got = pool_features([10, 8, 5, 3, 2, 2], depth=3, query_tokens=4)
    spread = math.sqrt(((10 - 23 / 3) ** 2 + (8 - 23 / 3) ** 2 + (5 - 23 / 3) ** 2) / 3)
    assert got["top"] == 10
    assert got["gap"] == 5
    assert got["gap12"] == 2
    assert got["spread"] == pytest.approx(spread)
    assert got["nqc"] == pytest.approx(spread / 5)
    assert got["wig"] == pytest.approx((23 / 3 - 5) / 2)  # sqrt(|q|) = 2


def test_one_result_pool_and_empty_pool() -> None:
    one = pool_features([0.7], depth=5, query_tokens=0)
    assert (one["top"], one["gap"], one["gap12"], one["spread"], one["wig"]) == (0.7, 0, 0, 0, 0)
    assert pool_features([], depth=5, query_tokens=3) == dict.fromkeys(ARM_FEATURES)


def test_rank_biased_overlap_by_hand() -> None:
    p = 0.9
    assert rank_biased_overlap(["a", "b", "c"], ["a", "b", "c"]) == pytest.approx(1.0)
    assert rank_biased_overlap(["a", "b"], ["c", "d"]) == 0.0
    assert rank_biased_overlap([], ["a"]) == 0.0
    # A = a b c, B = b a d: X1 = 0, X2 = 2, X3 = 2, d = 3.
    # RBO_ext = (2/3) p^3 + (1-p)/p (0 + (2/2) p^2 + (2/3) p^3)
    expected = (2 / 3) * p**3 + (1 - p) / p * (p**2 + (2 / 3) * p**3)
    assert rank_biased_overlap(["a", "b", "c"], ["b", "a", "d"]) == pytest.approx(expected)
    # Unequal lengths: the prefixes of equal depth (2) are compared.
    assert rank_biased_overlap(["a", "b", "z"], ["b", "a"]) == pytest.approx(
        (2 / 2) * p**2 + (1 - p) / p * (p**2)
    )


def test_pair_features_by_hand() -> None:
    got = pair_features([1, 2, 3, 9], [2, 4, 1, 8], depth=3)
    assert got["jaccard"] == pytest.approx(2 / 4)  # {1,2,3} & {2,4,1} = {1,2}
    assert got["top1"] == 0.0
    assert got["rbo"] == pytest.approx(rank_biased_overlap([1, 2, 3], [2, 4, 1]))
    assert pair_features([], [1], depth=3) == {"jaccard": None, "rbo": None, "top1": None}


def test_retrieval_features_name_every_arm_and_pair_and_mark_an_empty_arm() -> None:
    pools = {"bm25": ArmPool([3, 1], [2.0, 1.0]), "dense": ArmPool([], [])}
    got = retrieval_features(pools, ["bm25", "dense"], depth=5, query_tokens=2)
    assert list(got) == feature_names(["bm25", "dense"])[-len(got) :]
    assert got["bm25.top"] == 2.0
    assert missing_features(got) == [
        *(f"dense.{f}" for f in ARM_FEATURES),
        "bm25~dense.jaccard",
        "bm25~dense.rbo",
        "bm25~dense.top1",
    ]


def test_query_features_count_the_parse_and_the_script() -> None:
    parsed = ParsedQuery(
        cities=("三亚",),
        entities=("日月湾", "石梅湾"),
        excluded_entities=("日月湾",),
        negation_cues=("除了",),
        mentions=(("日月湾", "日月湾"), ("Riyue Bay", "日月湾"), ("石梅湾", "石梅湾")),
        length=12,
    )
    got = query_features(
        "除了日月湾 AB12", parsed, ["除了", "日月湾", "ab12"], "negation", ["default", "negation"]
    )
    assert got["query.chars"] == 12
    assert got["query.tokens"] == 3
    assert (got["query.entities"], got["query.aliases"], got["query.cities"]) == (2, 1, 1)
    assert (got["query.negation_cues"], got["query.excluded"]) == (1, 1)
    assert (got["route.default"], got["route.negation"]) == (0.0, 1.0)
    # 5 Han, 2 Latin letters, 2 digits among 9 meaningful characters.
    assert (got["query.han"], got["query.latin"], got["query.digit"]) == pytest.approx(
        (5 / 9, 2 / 9, 2 / 9)
    )
    assert script_mix("，。 ") == (0.0, 0.0, 0.0)


def test_feature_names_are_query_then_routes_then_terms_then_arms_then_pairs() -> None:
    names = feature_names(["bm25", "dense", "m3"], ["a", "b"])
    assert names[10:12] == ["route.a", "route.b"]
    assert names.index("terms.oov") == 12
    assert "bm25~m3.rbo" in names and "dense~m3.jaccard" in names
    assert len(names) == len(set(names))


def test_a_query_record_round_trips_its_features() -> None:
    from retrieval_bench.records import EvalQuery, FilterDecision, QueryRecord

    query = EvalQuery(query_id="q1", query="x", query_type="t", label_status="reviewed")
    record = QueryRecord(query, "bm25", "bm25", ParsedQuery(), FilterDecision(None))
    assert "features" not in record.to_json()  # a job without a learned router: unchanged
    featured = QueryRecord(
        query, "bm25", "bm25", ParsedQuery(), FilterDecision(None),
        features={"bm25.top": 2.5, "dense.top": None},
    )  # fmt: skip
    back = QueryRecord.from_json(featured.to_json())
    assert back.features == {"bm25.top": 2.5, "dense.top": None}
