"""Query parsing: entities with aliases, overlapping names, cities and negation scope."""

from __future__ import annotations

import pytest

from retrieval_bench.records import Entity
from retrieval_bench.routing.parser import NegationRules, QueryParser, query_length

ENTITIES = (
    Entity("蜈支洲岛旅游区", ("蜈支洲岛", "蜈支洲"), "island", "三亚"),
    Entity("亚龙湾海滩", ("亚龙湾",), "beach", "三亚"),
    Entity("亚龙湾热带天堂森林公园", ("热带天堂森林公园", "亚龙湾森林公园"), "park", "三亚"),
    Entity("日月湾冲浪基地", ("日月湾",), "beach", "万宁"),
    Entity("石梅湾旅游度假区", ("石梅湾",), "beach", "万宁"),
    Entity("三亚湾椰梦长廊", ("三亚湾", "椰梦长廊"), "beach", "三亚"),
    Entity("呀诺达雨林文化旅游区", ("呀诺达",), "park", "三亚"),
    Entity("Club Med三亚", ("club med",), "hotel", "三亚"),
)
NEGATION = NegationRules(
    prefix_cues=("除了", "不要", "不包括", "不想去", "不去"),
    suffix_cues=("以外", "之外"),
    conjunctions=("和", "、", "与"),
    clause_breaks=("，", ",", "。", "？", "但"),
    max_gap=4,
)


@pytest.fixture
def parser() -> QueryParser:
    return QueryParser(["三亚", "万宁", "海口"], ENTITIES, NEGATION)


def test_alias_maps_to_its_canonical_entity(parser: QueryParser) -> None:
    parsed = parser.parse("蜈支洲门票多少钱")
    assert parsed.entities == ("蜈支洲岛旅游区",)
    assert parsed.mentions == (("蜈支洲", "蜈支洲岛旅游区"),)


def test_long_official_name_and_short_name_are_one_entity(parser: QueryParser) -> None:
    # The longest surface wins: 蜈支洲岛旅游区 is not also read as 蜈支洲岛 or 蜈支洲.
    parsed = parser.parse("蜈支洲岛旅游区和蜈支洲岛是一个地方吗")
    assert parsed.entities == ("蜈支洲岛旅游区",)
    assert [m[0] for m in parsed.mentions] == ["蜈支洲岛旅游区", "蜈支洲岛"]


def test_overlapping_names_prefer_the_longest(parser: QueryParser) -> None:
    assert parser.parse("亚龙湾热带天堂森林公园门票").entities == ("亚龙湾热带天堂森林公园",)
    assert parser.parse("亚龙湾森林公园怎么去").entities == ("亚龙湾热带天堂森林公园",)
    both = parser.parse("亚龙湾和热带天堂森林公园哪个近")
    assert both.entities == ("亚龙湾海滩", "亚龙湾热带天堂森林公园")


def test_city_inside_an_entity_name_is_still_a_city(parser: QueryParser) -> None:
    parsed = parser.parse("三亚湾看日落")
    assert parsed.entities == ("三亚湾椰梦长廊",)
    assert parsed.cities == ("三亚",)


def test_matching_is_normalised_like_the_tokenizer(parser: QueryParser) -> None:
    # Full-width letters and upper case match the lexicon's ASCII lower-case alias.
    assert parser.parse("ＣＬＵＢ ＭＥＤ 一晚多少钱").entities == ("Club Med三亚",)


def test_no_entity_and_no_cue(parser: QueryParser) -> None:
    parsed = parser.parse("带小孩玩沙子的免费海滩")
    assert parsed.entities == parsed.excluded_entities == parsed.negation_cues == ()
    assert parsed.length == 11


def test_prefix_cue_excludes_the_entity_after_it(parser: QueryParser) -> None:
    parsed = parser.parse("万宁除了日月湾还有什么适合冲浪的地方")
    assert parsed.negation_cues == ("除了",)
    assert parsed.entities == ("日月湾冲浪基地",)
    assert parsed.excluded_entities == ("日月湾冲浪基地",)
    assert parsed.cities == ("万宁",)


def test_conjunction_extends_the_scope(parser: QueryParser) -> None:
    parsed = parser.parse("除了日月湾和石梅湾，万宁还能去哪冲浪")
    assert parsed.excluded_entities == ("日月湾冲浪基地", "石梅湾旅游度假区")


def test_scope_stops_at_an_unjoined_entity(parser: QueryParser) -> None:
    parsed = parser.parse("不想去蜈支洲岛想去亚龙湾")
    assert parsed.entities == ("蜈支洲岛旅游区", "亚龙湾海滩")
    assert parsed.excluded_entities == ("蜈支洲岛旅游区",)


def test_scope_stops_at_a_clause_break(parser: QueryParser) -> None:
    # "不要太贵" negates a price, not the entity in the next clause.
    parsed = parser.parse("不要太贵，蜈支洲岛怎么玩")
    assert parsed.negation_cues == ("不要",)
    assert parsed.excluded_entities == ()


def test_scope_respects_max_gap(parser: QueryParser) -> None:
    assert parser.parse("不想去人多的蜈支洲岛").excluded_entities == ("蜈支洲岛旅游区",)
    assert parser.parse("不要买特别特别贵的蜈支洲岛套票").excluded_entities == ()


def test_break_before_the_cue_does_not_end_its_scope(parser: QueryParser) -> None:
    parsed = parser.parse("想看雨林，但不想去商业化的呀诺达，有什么推荐")
    assert parsed.excluded_entities == ("呀诺达雨林文化旅游区",)


def test_suffix_cue_excludes_the_entity_before_it(parser: QueryParser) -> None:
    assert parser.parse("日月湾以外还有哪里冲浪").excluded_entities == ("日月湾冲浪基地",)
    # Prefix and suffix together name the entity once.
    assert parser.parse("除了日月湾以外还有哪").excluded_entities == ("日月湾冲浪基地",)


def test_excluded_city_leaves_the_city_filter(parser: QueryParser) -> None:
    parsed = parser.parse("除了三亚还有哪里能潜水")
    assert parsed.excluded_cities == ("三亚",)
    assert parsed.cities == ()
    assert parsed.excluded_entities == ()


def test_cue_inside_an_entity_name_is_not_a_cue() -> None:
    parser = QueryParser([], (Entity("不要钱博物馆"),), NEGATION)
    parsed = parser.parse("不要钱博物馆几点开门")
    assert parsed.negation_cues == ()
    assert parsed.entities == ("不要钱博物馆",)


def test_without_cue_lists_nothing_is_negated() -> None:
    parsed = QueryParser(["万宁"], ENTITIES).parse("万宁除了日月湾还有什么")
    assert parsed.negation_cues == parsed.excluded_entities == ()
    assert parsed.entities == ("日月湾冲浪基地",)


def test_query_length_ignores_spaces_and_punctuation() -> None:
    assert query_length("蜈支洲 门票？") == 5


def test_parse_is_recorded_as_json(parser: QueryParser) -> None:
    record = parser.parse("除了日月湾还有什么").to_json()
    assert record["excluded_entities"] == ["日月湾冲浪基地"]
    assert record["mentions"] == [["日月湾", "日月湾冲浪基地"]]
    assert set(record) >= {"cities", "entities", "negation_cues", "length"}
