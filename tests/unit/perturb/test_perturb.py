"""Perturbed evaluation sets (`python -m run.perturb`): every variant in the written file is
recomputed here from its original with the library its kind names (OpenCC, pypinyin, jieba,
unicodedata), independently of the code that made it; kinds are deterministic for a seed; a kind
that cannot change a query leaves it out and counts it; bad input exits 2 naming it."""

from __future__ import annotations

import json
import logging
from itertools import pairwise
from pathlib import Path
from typing import Any

import jieba
import opencc
import pytest
from conftest import ROOT
from support.perturbations import RECOMPUTE

from retrieval_bench.config.robustness import KINDS
from retrieval_bench.data.evalset import load_evalset
from retrieval_bench.data.passages import load_lexicon
from retrieval_bench.perturb.kinds import BUILDERS
from retrieval_bench.records import EvalQuery
from run.perturb import main

TRAVEL_SET = ROOT / "evalsets" / "travel.jsonl"
TRAVEL_CORPUS = ROOT / "corpus" / "travel"
# Queries the travel set lacks: ASCII, spaces and traditional characters, so every kind changes
# some query.
EXTRA = [
    {"query_id": "x1", "query": "GRB 090423在2010年被什么天体超越？", "query_type": "mixed",
     "label_status": "reviewed", "relevant_ids": ["sanya-wuzhizhoudao-tickets"]},
    {"query_id": "x2", "query": "蜈支洲島門票多少錢", "query_type": "mixed",
     "label_status": "reviewed", "relevant_ids": ["sanya-wuzhizhoudao-tickets"]},
    {"query_id": "x3", "query": "Ｍ１９１１ 手枪", "query_type": "mixed",
     "label_status": "unreviewed", "relevant_ids": []},
]  # fmt: skip


@pytest.fixture(scope="module")
def perturbed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, EvalQuery]]:
    """travel plus EXTRA, perturbed by every kind through the command, and the originals."""
    folder = tmp_path_factory.mktemp("perturb")
    evalset = folder / "evalset.jsonl"
    lines = TRAVEL_SET.read_text(encoding="utf-8") + "".join(
        json.dumps(r, ensure_ascii=False) + "\n" for r in EXTRA
    )
    evalset.write_text(lines, encoding="utf-8")
    out = folder / "perturbed.jsonl"
    argv = [str(evalset), "--corpus", str(TRAVEL_CORPUS), "--kinds", ",".join(KINDS)]
    assert main([*argv, "--rate", "0.3", "--seed", "7", "--out", str(out)]) == 0
    return out, {q.query_id: q for q in load_evalset(evalset)}


def test_every_kind_has_an_implementation() -> None:
    assert sorted(BUILDERS) == sorted(KINDS)


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_every_variant_recomputes_from_its_original(
    perturbed: tuple[Path, dict[str, EvalQuery]],
) -> None:
    path, originals = perturbed
    variants = load_evalset(path)
    jieba.setLogLevel(logging.WARNING)
    seen: dict[str, int] = {}
    for variant in variants:
        original = originals[variant.meta["perturbed_from"]]
        change = variant.meta["perturbation"]
        kind = change["kind"]
        seen[kind] = seen.get(kind, 0) + 1
        assert variant.query_id == f"{original.query_id}~{kind}"
        # labels copied from the original
        assert variant.relevance == original.relevance
        assert variant.query_type == original.query_type
        assert variant.label_status == original.label_status
        assert variant.expected_entities == original.expected_entities
        assert variant.query != original.query, "a variant that changed nothing"
        assert RECOMPUTE[kind](original.query, variant.query, change), variant.query_id
    assert sorted(seen) == sorted(k for k in KINDS), "some kind changed no query"


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_entities_are_kept_out_of_homophones_unless_asked(tmp_path: Path) -> None:
    lexicon = load_lexicon(TRAVEL_CORPUS / "lexicon.jsonl")
    surfaces = [s for e in lexicon for s in (e.name, *e.aliases)]
    originals = {q.query_id: q.query for q in load_evalset(TRAVEL_SET)}
    for entities, inside in (("protect", False), ("too", True)):
        out = tmp_path / f"{entities}.jsonl"
        argv = [str(TRAVEL_SET), "--corpus", str(TRAVEL_CORPUS), "--kinds", "homophone"]
        assert main([*argv, "--rate", "1", "--entities", entities, "--out", str(out)]) == 0
        touched = False
        for variant in load_evalset(out):
            original = variant.meta["perturbation"]
            text = originals[variant.meta["perturbed_from"]]
            spans = [
                (i, i + len(s)) for s in surfaces for i in range(len(text)) if text.startswith(s, i)
            ]
            for position, *_ in original["changes"]:
                touched |= any(a <= position < b for a, b in spans)
        assert touched is inside


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_same_seed_same_file_other_seed_other_slips(tmp_path: Path) -> None:
    argv = [str(TRAVEL_SET), "--kinds", "homophone,spacing"]
    files = []
    for name, seed in (("a", "1"), ("b", "1"), ("c", "2")):
        files.append(tmp_path / f"{name}.jsonl")
        assert main([*argv, "--seed", seed, "--out", str(files[-1])]) == 0
    texts = [f.read_text(encoding="utf-8") for f in files]
    assert texts[0] == texts[1]
    assert texts[0] != texts[2]


def test_a_kind_that_changes_nothing_is_counted_not_passed_through(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.jsonl"
    assert main([str(TRAVEL_SET), "--kinds", "unspacing,truncate", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert (
        "unspacing (str.isspace): 0 variants, 166 queries left out (holds no whitespace: 166)"
        in (captured.out)
    )
    assert "warning: kind unspacing changed no query" in captured.err
    assert {q.meta["perturbation"]["kind"] for q in load_evalset(out)} == {"truncate"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--kinds", "tradtional"],
            "'--kinds': unknown kind 'tradtional'; did you mean 'traditional'?",
        ),
        (["--kinds", "homophone", "--rate", "0"], "'--rate': must be in (0, 1], got 0.0"),
        (["--kinds", "homophone", "--rate", "1.5"], "'--rate': must be in (0, 1], got 1.5"),
        (
            ["--kinds", "traditional", "--opencc-traditional", "s2x"],
            "'--opencc-traditional': OpenCC has no configuration 's2x'",
        ),
    ],
)
def test_bad_options_exit_2_naming_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert main([str(TRAVEL_SET), *args, "--out", str(tmp_path / "x.jsonl")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x.jsonl").exists()


def test_queries_without_ids_exit_2_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.jsonl"
    record = {
        "query": "海口骑楼",
        "query_type": "t",
        "label_status": "reviewed",
        "relevant_ids": [],
    }
    bad.write_text(
        TRAVEL_SET.read_text(encoding="utf-8").splitlines()[0]
        + "\n"
        + json.dumps(record, ensure_ascii=False)
        + "\n",
        encoding="utf-8",
    )
    assert main([str(bad), "--kinds", "traditional", "--out", str(tmp_path / "x.jsonl")]) == 2
    assert f"{bad}:2: missing field 'query_id'" in capsys.readouterr().err


def test_corpus_side_conversion_is_a_separate_dataset(tmp_path: Path) -> None:
    out = tmp_path / "trad"
    argv = [str(TRAVEL_SET), "--corpus", str(TRAVEL_CORPUS), "--kinds", "traditional"]
    assert main([*argv, "--out", str(tmp_path / "p.jsonl"), "--corpus-out", str(out)]) == 0
    source = [
        json.loads(line) for line in (TRAVEL_CORPUS / "passages.jsonl").open(encoding="utf-8")
    ]
    converted = [json.loads(line) for line in (out / "passages.jsonl").open(encoding="utf-8")]
    convert = opencc.OpenCC("s2t").convert
    assert [p["id"] for p in converted] == [p["id"] for p in source]
    assert all(
        c["text"] == convert(s["text"]) and c.get("meta") == s.get("meta")
        for c, s in zip(converted, source, strict=True)
    )
    entity = next(e for e in load_lexicon(out / "lexicon.jsonl") if e.name == "蜈支洲岛旅游区")
    assert "蜈支洲島" in entity.aliases


def test_the_homophone_table_from_the_store_is_the_one_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The table is built once from jieba's dictionary and pypinyin, then read back from the
    user's cache by later processes, without pypinyin reading a character."""
    import pypinyin

    from retrieval_bench.perturb.homophone import homophones
    from retrieval_bench.text.tokenizer import base_dictionary

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    built = homophones.__wrapped__()
    assert list((tmp_path / "retrieval-bench" / "homophones").glob("pypinyin-*-jieba-*.pickle"))

    def unread(*args: object, **kwargs: object) -> None:
        raise AssertionError("the stored table was rebuilt")

    monkeypatch.setattr(pypinyin, "lazy_pinyin", unread)
    assert homophones.__wrapped__() == built
    freq = base_dictionary()[0]
    assert "京" in built["jing"] and all(
        freq[a] >= freq[b] > 0 for a, b in pairwise(built["jing"])
    ), "most frequent first"


def test_the_evaluation_set_is_never_its_own_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    evalset = tmp_path / "travel.jsonl"
    evalset.write_bytes(TRAVEL_SET.read_bytes())
    for out in (evalset, tmp_path / "." / "travel.jsonl"):
        assert main([str(evalset), "--kinds", "traditional", "--out", str(out)]) == 2
        assert f"'--out': {out} is the evaluation set being perturbed" in capsys.readouterr().err
    assert evalset.read_bytes() == TRAVEL_SET.read_bytes()


def test_an_existing_file_with_other_content_is_refused_not_replaced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "kept.jsonl"
    out.write_text("an annotator's file\n", encoding="utf-8")
    argv = [str(TRAVEL_SET), "--kinds", "traditional", "--out", str(out)]
    assert main(argv) == 2
    assert f"{out}: exists with other content" in capsys.readouterr().err
    assert out.read_text(encoding="utf-8") == "an annotator's file\n"
    out.unlink()
    assert main(argv) == 0
    written = out.read_bytes()
    assert main(argv) == 0  # the same variants again: nothing is replaced by other content
    assert out.read_bytes() == written


@pytest.mark.parametrize(
    ("make", "flag", "says"),
    [
        (lambda tmp: ["--corpus", str(tmp / "no-such-corpus")], "--corpus", "is not a folder"),
        (lambda tmp: ["--out", str(tmp / "a-file" / "x.jsonl")], "--out", "is a file, not a"),
        (lambda tmp: ["--out", str(tmp)], "--out", "is a folder; name the file to write"),
    ],
)
def test_a_path_that_cannot_be_used_exits_2_naming_its_flag(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    make: Any,
    flag: str,
    says: str,
) -> None:
    (tmp_path / "a-file").write_text("", encoding="utf-8")
    args = ["--out", str(tmp_path / "p.jsonl"), *make(tmp_path)]
    assert main([str(TRAVEL_SET), "--kinds", "homophone", *args]) == 2
    err = capsys.readouterr().err
    assert f"'{flag}': " in err and says in err, err
    assert not (tmp_path / "p.jsonl").exists()
