"""Every perturbation kind on a few queries, in process (the fast tier's share of
test_perturb.py, which checks the whole travel set through `run.perturb`): each variant
recomputed from its original with the library its kind names, and the edges a kind must get
right: a query of exactly `truncate_chars` characters, every ASCII character widened and
narrowed back, ideographic spaces and tabs in spacing."""

from __future__ import annotations

import random

import pytest
from support.perturbations import RECOMPUTE, TRAVEL_CORPUS

from retrieval_bench.config.robustness import KINDS
from retrieval_bench.data.passages import load_lexicon
from retrieval_bench.perturb.base import PerturbSettings, Variant
from retrieval_bench.perturb.evalset import perturb_queries
from retrieval_bench.perturb.kinds import BUILDERS
from retrieval_bench.perturb.spacing import NO_BOUNDARY, Spacing, Unspacing
from retrieval_bench.perturb.truncate import Truncate
from retrieval_bench.perturb.width import FullWidth, HalfWidth
from retrieval_bench.records import EvalQuery

# Each kind changes at least one: ASCII and spaces, traditional characters, full-width forms,
# lexicon entities (蜈支洲岛, 三亚) with characters that have homophones.
QUERIES = [
    EvalQuery("x1", "GRB 090423在2010年被什么天体超越？", "mixed", "reviewed", {"p": 1}),
    EvalQuery("x2", "蜈支洲島門票多少錢", "mixed", "reviewed", {"p": 1}),
    EvalQuery("x3", "Ｍ１９１１ 手枪", "mixed", "reviewed", {"p": 1}),
    EvalQuery("x4", "三亚蜈支洲岛门票多少钱一张", "fact", "reviewed", {"p": 1}),
    EvalQuery("x5", "去三亚旅游最好的季节是什么时候", "fact", "reviewed", {"p": 1}),
]
ASCII = "".join(chr(c) for c in range(0x21, 0x7F))  # every printable ASCII but the space


def query(text: str) -> EvalQuery:
    return EvalQuery("q", text, "t", "reviewed", {"p": 1})


def test_every_kind_recomputes_from_its_original() -> None:
    entities = tuple(load_lexicon(TRAVEL_CORPUS / "lexicon.jsonl"))
    settings = PerturbSettings(rate=1.0, seed=7, entities=entities)
    by_id = {q.query_id: q for q in QUERIES}
    for kind in KINDS:
        variants, [report] = perturb_queries(QUERIES, [BUILDERS[kind](settings)], seed=7)
        assert variants, f"{kind} changed no query"
        assert report.variants == len(variants)
        assert report.variants + sum(report.left_out.values()) == len(QUERIES)
        for variant in variants:
            original = by_id[variant.meta["perturbed_from"]]
            change = variant.meta["perturbation"]
            assert change["kind"] == kind and variant.query_id == f"{original.query_id}~{kind}"
            assert variant.relevance == original.relevance
            assert variant.query != original.query, "a variant that changed nothing"
            assert RECOMPUTE[kind](original.query, variant.query, change), variant.query_id


def test_a_query_of_exactly_truncate_chars_is_left_out() -> None:
    cut = Truncate(6)
    rng = random.Random(0)
    # Six characters (trailing spaces aside): nothing to cut, never a variant equal to it.
    assert isinstance(cut.apply(query("三亚湾门票价"), rng), str)
    assert isinstance(cut.apply(query("三亚湾门票价  "), rng), str)
    # Seven: cut to six.
    made = cut.apply(query("三亚湾门票价格"), rng)
    assert isinstance(made, Variant) and made.text == "三亚湾门票价"
    assert made.changes == {"chars": 6, "cut": "格"}


def test_every_ascii_character_is_widened_and_narrowed_back() -> None:
    rng = random.Random(0)
    text = f"{ASCII} 三亚"
    wide = FullWidth().apply(query(text), rng)
    assert isinstance(wide, Variant)
    # The Unicode block of full-width forms: U+FF01..U+FF5E, U+0021..U+007E moved by 0xFEE0;
    # the space and the ideographs stay.
    assert wide.text == "".join(chr(ord(c) + 0xFEE0) for c in ASCII) + " 三亚"
    assert len(wide.changes["changes"]) == len(ASCII) == 94
    narrow = HalfWidth().apply(query(wide.text), rng)
    assert isinstance(narrow, Variant) and narrow.text == text


def test_ideographic_spaces_and_tabs_are_whitespace_in_spacing() -> None:
    rng = random.Random(0)
    # unspacing removes every whitespace character: the ideographic space U+3000 and tabs too.
    made = Unspacing().apply(query("GRB\t090423\u3000在 2010年"), rng)
    assert isinstance(made, Variant)
    assert made.text == "GRB090423在2010年" and made.changes == {"removed_at": [3, 10, 12]}
    # spacing adds a space only between two words: none beside an ideographic space or a tab.
    assert Spacing().apply(query("三亚\u3000门票"), rng) == NO_BOUNDARY
    assert Spacing().apply(query("三亚\t门票"), rng) == NO_BOUNDARY
    spaced = Spacing().apply(query("三亚门票"), rng)
    assert isinstance(spaced, Variant) and spaced.text == "三亚 门票"


@pytest.mark.parametrize("kind", ["unspacing", "truncate", "fullwidth", "halfwidth"])
def test_a_kind_leaves_out_what_it_cannot_change(kind: str) -> None:
    unchanged = {"unspacing": "三亚门票", "truncate": "三亚", "fullwidth": "三亚门票",
                 "halfwidth": "三亚门票"}  # fmt: skip
    made = BUILDERS[kind](PerturbSettings()).apply(query(unchanged[kind]), random.Random(0))
    assert isinstance(made, str) and made
