"""Routing rules: classification order, strategies, start-up refusals, router measurement, and
the routing guide's new-domain example (docs/how-to/route-queries.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import ROOT
from omegaconf import OmegaConf

from retrieval_bench.config import BUILTIN_ARMS
from retrieval_bench.config.router import RouterConfig
from retrieval_bench.data.passages import load_lexicon
from retrieval_bench.errors import ConfigError, DataError
from retrieval_bench.records import Entity, EvalQuery, FilterDecision, ParsedQuery, QueryRecord
from retrieval_bench.routing.metrics import routing_accuracy, routing_counts, serves
from retrieval_bench.routing.parser import QueryParser
from retrieval_bench.routing.router import DEFAULT_RULE, RuleRouter
from retrieval_bench.routing.rules import RuleSet, load_rule_set

LEXICON = (
    Entity("蜈支洲岛旅游区", ("蜈支洲岛", "蜈支洲")),
    Entity("亚龙湾海滩", ("亚龙湾",)),
    Entity("日月湾冲浪基地", ("日月湾",)),
    Entity("石梅湾旅游度假区", ("石梅湾",)),
)


def preset(**overrides: object) -> RouterConfig:
    """conf/router/rules.yaml as the app loads it, with dotted-key overrides."""
    cfg = OmegaConf.merge(
        OmegaConf.structured(RouterConfig), OmegaConf.load(ROOT / "conf" / "router" / "rules.yaml")
    )
    for key, value in overrides.items():
        OmegaConf.update(cfg, key, value, merge=True)
    result = OmegaConf.to_object(cfg)
    assert isinstance(result, RouterConfig)
    return result


def rule_set(**overrides: object) -> RuleSet:
    loaded = load_rule_set(preset(**overrides), tuple(BUILTIN_ARMS))
    assert loaded is not None
    return loaded


def route_of(text: str, rules: RuleSet | None = None) -> tuple[str, str]:
    rules = rules or rule_set()
    parsed = QueryParser(["三亚", "万宁"], LEXICON, rules.negation).parse(text)
    return RuleRouter(rules).classify(parsed)


@pytest.mark.parametrize(
    ("query", "route"),
    [
        ("蜈支洲门票多少钱", "entity_exact"),
        ("蜈支洲岛和亚龙湾哪个更适合带孩子", "multi_hop"),
        ("万宁除了日月湾还有什么", "negation"),
        # Two entities, but an exclusion: the negation rule is tested first.
        ("除了日月湾和石梅湾，万宁还能去哪冲浪", "negation"),
        # One entity but long: not an exact lookup.
        ("蜈支洲岛上有哪些适合老人和小孩一起玩的项目", "default"),
        # A cue that excludes nothing is not a negation.
        ("不要太贵，蜈支洲岛怎么玩", "entity_exact"),
        ("带小孩玩沙子的免费海滩", "default"),
    ],
)
def test_rules_route_in_their_stated_order(query: str, route: str) -> None:
    assert route_of(query)[0] == route


def test_the_rule_that_fired_is_named() -> None:
    assert route_of("万宁除了日月湾还有什么")[1] == "rules[0]: excludes=true"
    assert route_of("带小孩玩沙子的免费海滩")[1] == DEFAULT_RULE


def test_length_threshold_comes_from_config() -> None:
    query = "蜈支洲岛上有哪些适合老人和小孩一起玩的项目"
    assert route_of(query, rule_set(short_query_length=30))[0] == "entity_exact"


def test_routes_carry_their_strategies() -> None:
    routes = rule_set().routes
    assert routes["entity_exact"].strategy.combine == "fill"
    assert routes["entity_exact"].strategy.arms == ("bm25", "dense")
    assert routes["negation"].strategy.exclude is True
    assert routes["default"].strategy.exclude is False
    router = RuleRouter(rule_set())
    routing = router(
        EvalQuery("q", "x", "negation", "reviewed"), ParsedQuery(excluded_entities=("a",))
    )
    assert (routing.route, routing.strategy.name) == ("negation", "exclude_then_fuse")


def test_router_none_has_no_rule_set() -> None:
    assert load_rule_set(RouterConfig(), tuple(BUILTIN_ARMS)) is None


@pytest.mark.parametrize(
    ("overrides", "key", "text"),
    [
        ({"name": "smart"}, "router.name", "'smart'"),
        (
            {"rules": [{"route": "exatc", "when": {"short": True}}]},
            "router.rules[0].route",
            "exatc",
        ),
        ({"routes.negation.strategy": "bm25_only"}, "router.routes.negation.strategy", "bm25_only"),
        (
            {"strategies.hybrid.arms": ["bm25", "sparse"]},
            "router.strategies.hybrid.arms[1]",
            "sparse",
        ),
        ({"strategies.hybrid.arms": []}, "router.strategies.hybrid.arms", "at least one"),
        ({"strategies.hybrid.combine": "max"}, "router.strategies.hybrid.combine", "'max'"),
        ({"default_route": "fallback"}, "router.default_route", "fallback"),
        ({"negation.prefix_cues": []}, "router.negation.prefix_cues", "rules[0] tests negation"),
        ({"negation.suffix_cues": ["以外", " "]}, "router.negation.suffix_cues[1]", "empty"),
        ({"rules": [{"route": "negation", "when": {}}]}, "router.rules[0].when", "no condition"),
        ({"short_query_length": 0}, "router.short_query_length", "positive"),
        ({"name": "none", "rules_file": "x.yaml"}, "router.rules_file", "router=rules"),
    ],
)
def test_bad_router_config_is_refused_naming_the_key(
    overrides: dict[str, object], key: str, text: str
) -> None:
    with pytest.raises(ConfigError) as err:
        load_rule_set(preset(**overrides), tuple(BUILTIN_ARMS))
    assert err.value.key == key
    assert text in str(err.value)


def test_empty_cue_list_is_fine_when_no_rule_tests_negation() -> None:
    rules = rule_set(
        **{
            "negation.prefix_cues": [],
            "rules": [{"route": "multi_hop", "when": {"min_entities": 2}}],
        }
    )
    assert rules.reachable() == ["multi_hop", "default"]


@pytest.mark.parametrize(
    ("content", "entry"),
    [
        (
            "rules:\n"
            "  - {route: negation, when: {excludes: true}}\n"
            "  - {route: nope, when: {short: true}}\n",
            "rules[1].route: unknown route 'nope'",
        ),
        (
            "routes:\n  negation: {strategy: fancy}\n",
            "routes.negation.strategy: unknown strategy 'fancy'",
        ),
        ("negation:\n  prefix_cues: []\n", "negation.prefix_cues: is empty"),
        ("rules:\n  - {route: negation, when: {excludez: true}}\n", "when.excludez"),
        ("name: rules\n", "name: set on the command line"),
        ("rules: [unclosed\n", "not valid YAML"),
    ],
)
def test_bad_rules_file_is_refused_naming_file_and_entry(
    tmp_path: Path, content: str, entry: str
) -> None:
    path = tmp_path / "domain_rules.yaml"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataError) as err:
        load_rule_set(preset(rules_file=str(path)), tuple(BUILTIN_ARMS))
    assert str(path) in str(err.value)
    assert entry in str(err.value)


def test_missing_rules_file_names_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"router\.rules_file"):
        load_rule_set(preset(rules_file=str(tmp_path / "absent.yaml")), tuple(BUILTIN_ARMS))


def test_alias_claimed_by_two_entities_is_refused_with_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "lexicon.jsonl"
    path.write_text(
        '{"name": "亚龙湾海滩", "aliases": ["亚龙湾"]}\n'
        '{"name": "亚龙湾热带天堂森林公园", "aliases": ["亚龙湾"]}\n',
        encoding="utf-8",
    )
    with pytest.raises(DataError) as err:
        load_lexicon(path)
    assert f"{path}:2" in str(err.value)
    assert "'亚龙湾'" in str(err.value)


def _record(qid: str, qtype: str, route: str, rule: str, parsed: ParsedQuery) -> QueryRecord:
    query = EvalQuery(qid, "q", qtype, "reviewed")
    strategy = rule_set().routes[route].strategy
    return QueryRecord(query, route, strategy.name, parsed, FilterDecision(None), {}, rule)


def test_confusion_matrix_accuracy_and_default_counts() -> None:
    rules = rule_set()
    records = [
        _record("1", "entity_exact", "entity_exact", "rules[2]", ParsedQuery(entities=("a",))),
        _record("2", "entity_exact", "default", DEFAULT_RULE, ParsedQuery()),
        _record("3", "fuzzy_intent", "default", DEFAULT_RULE, ParsedQuery()),
        _record("4", "negation", "negation", "rules[0]", ParsedQuery(excluded_entities=("a",))),
        _record("5", "negation", "default", DEFAULT_RULE, ParsedQuery(negation_cues=("不要",))),
    ]
    served = serves(rules, [r.query.query_type for r in records])
    # The default route serves every type no other route claims.
    assert "fuzzy_intent" in served["default"] and "negation" not in served["default"]
    measured = routing_accuracy(records, served)
    assert measured["confusion"]["entity_exact"] == {"default": 1, "entity_exact": 1}
    assert measured["accuracy"]["overall"] == pytest.approx(3 / 5)
    assert measured["accuracy"]["by_type"]["negation"] == {"accuracy": 0.5, "n": 2, "correct": 1}
    assert measured["accuracy"]["by_route"]["default"]["precision"] == pytest.approx(1 / 3)
    counts = routing_counts(records)
    assert counts["default"] == 3
    assert counts["default_no_signal"] == 2  # query 5 had a cue


GUIDE = ROOT / "docs" / "how-to" / "route-queries.md"


def _guide_block(name: str) -> str:
    text = GUIDE.read_text(encoding="utf-8")
    match = re.search(rf"<!-- {re.escape(name)} -->\s*```\w*\n(.*?)```", text, re.S)
    assert match, f"{GUIDE.relative_to(ROOT)} has no block marked <!-- {name} -->"
    return match.group(1)


def test_the_guide_s_new_domain_example(tmp_path: Path) -> None:
    """The routing guide's rules file, lexicon and example queries, exactly as written there."""
    rules_path = tmp_path / "policy_rules.yaml"
    rules_path.write_text(_guide_block("docs-check: file policy_rules.yaml"), encoding="utf-8")
    lexicon_path = tmp_path / "lexicon.jsonl"
    lexicon_path.write_text(_guide_block("router-example-lexicon"), encoding="utf-8")
    rules = load_rule_set(preset(rules_file=str(rules_path)), tuple(BUILTIN_ARMS))
    assert rules is not None and rules.source == str(rules_path)
    parser = QueryParser([], load_lexicon(lexicon_path), rules.negation)
    router = RuleRouter(rules)
    examples = [
        line.split("->")
        for line in _guide_block("router-example-queries").splitlines()
        if "->" in line
    ]
    assert len(examples) >= 4
    for query, expected in examples:
        parsed = parser.parse(query.strip())
        route, _ = router.classify(parsed)
        expected_route, _, excluded = expected.strip().partition(" excludes ")
        assert route == expected_route, query
        assert parsed.excluded_entities == tuple(e for e in excluded.split(",") if e), query
