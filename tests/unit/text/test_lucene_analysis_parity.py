"""text/lucene_analysis.py against the real Lucene's token streams, whole corpora at a time.

Anserini's DumpAnalyzedQueries analyzes every line of a topics file with Lucene 9.9.1's
EnglishAnalyzer chain (`-language en`, Anserini's default analyzer) or CJKAnalyzer
(`-language zh`) and writes the tokens; every passage and query of the shipped corpora (both
analyzers), of SciFact (English) and of CMRC 2018 (CJK) where ../shared has them must analyze to
the same tokens here. Tabs and line breaks become spaces in the topics file (it is one query per
line); both analyzers treat them as they treat spaces. The code point tables of
text/lucene_unicode.py are re-derived from Lucene over the planes that hold letters, digits,
ideographs and emoji. Slow: each file is one JVM run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import anserini_or_skip, shared_benchmark

from retrieval_bench.paths import PROJECT_ROOT
from retrieval_bench.retrievers.anserini import run_anserini
from retrieval_bench.text.lucene_analysis import CJKBigramAnalyzer, EnglishAnalyzer
from retrieval_bench.text.lucene_unicode import AFTER_UNICODE_9, LUCENE_EMOJI_ONLY

pytestmark = pytest.mark.slow
_SAFE = str.maketrans({"\t": " ", "\n": " ", "\r": " "})


def lucene_tokens(texts: list[str], language: str, folder: Path) -> list[list[str]]:
    """Lucene's tokens for each text (DumpAnalyzedQueries; an empty text has none)."""
    topics, output = folder / f"topics.{language}.tsv", folder / f"tokens.{language}.tsv"
    safe = [t.translate(_SAFE) for t in texts]
    lines = [f"{i}\t{t}\n" for i, t in enumerate(safe) if t.strip()]
    topics.write_text("".join(lines), encoding="utf-8")
    arguments = ["-topics", str(topics), "-topicreader", "TsvInt", "-output", str(output)]
    run_anserini("util.DumpAnalyzedQueries", [*arguments, "-language", language], heap="1g")
    tokens: list[list[str]] = [[] for _ in texts]
    for line in output.read_text(encoding="utf-8").splitlines():
        key, _, joined = line.partition("\t")
        tokens[int(key)] = joined.split(" ") if joined else []
    return tokens


def _native(name: str) -> list[str]:
    folder = PROJECT_ROOT / "corpus" / name
    texts = []
    for line in (folder / "passages.jsonl").read_text(encoding="utf-8").splitlines():
        p = json.loads(line)
        texts.append(f"{p['title']}\n{p['text']}" if p.get("title") else p["text"])
    evalset = PROJECT_ROOT / "evalsets" / f"{name}.jsonl"
    for line in evalset.read_text(encoding="utf-8").splitlines():
        texts.append(json.loads(line)["query"])
    return texts


def _beir(path: Path) -> list[str]:
    texts = []
    for line in (path / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        d = json.loads(line)
        texts.append(f"{d['title']}\n{d['text']}" if d.get("title") else d["text"])
    for line in (path / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        texts.append(json.loads(line)["text"])
    return texts


def _first_difference(ours: list[list[str]], theirs: list[list[str]], texts: list[str]) -> str:
    for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        if a != b:
            return f"text {i}: {texts[i][:200]!r}\nours:   {a[:40]}\nLucene: {b[:40]}"
    return ""


@pytest.mark.parametrize("corpus", ["travel", "policy"])
def test_the_shipped_corpora_analyze_as_lucene_analyzes_them(corpus: str, tmp_path: Path) -> None:
    anserini_or_skip()
    texts = _native(corpus)
    for language, analyzer in (("en", EnglishAnalyzer()), ("zh", CJKBigramAnalyzer())):
        ours = [analyzer.tokenize(t) for t in texts]
        theirs = lucene_tokens(texts, language, tmp_path)
        assert ours == theirs, _first_difference(ours, theirs, texts)


@pytest.mark.parametrize(("name", "language"), [("scifact", "en"), ("cmrc2018", "zh")])
def test_the_shared_sets_analyze_as_lucene_analyzes_them(
    name: str, language: str, tmp_path: Path
) -> None:
    anserini_or_skip()
    texts = _beir(shared_benchmark(name))
    analyzer = EnglishAnalyzer() if language == "en" else CJKBigramAnalyzer()
    ours = [analyzer.tokenize(t) for t in texts]
    theirs = lucene_tokens(texts, language, tmp_path)
    assert ours == theirs, _first_difference(ours, theirs, texts)


def _ranges(points: list[int]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for point in sorted(points):
        if out and point == out[-1][1] + 1:
            out[-1][1] = point
        else:
            out.append([point, point])
    return [(a, b) for a, b in out]


def test_the_unicode_tables_are_lucenes_answer(tmp_path: Path) -> None:
    """Each code point of planes 0-3 alone: Lucene's CJKAnalyzer gives it a token exactly
    where this one does (the tables are what makes the two agree: without them, some 950
    symbols and 20,000 newer characters differ)."""
    anserini_or_skip()
    breaks = set("\t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\u2028\u2029")
    points = [
        cp for cp in range(0x21, 0x40000) if not 0xD800 <= cp <= 0xDFFF and chr(cp) not in breaks
    ]
    theirs = lucene_tokens([chr(cp) for cp in points], "zh", tmp_path)
    cjk = CJKBigramAnalyzer()
    differ = [
        cp for cp, b in zip(points, theirs, strict=True) if bool(cjk.tokenize(chr(cp))) != bool(b)
    ]
    assert differ == [], _ranges(differ)[:10]
    assert LUCENE_EMOJI_ONLY and AFTER_UNICODE_9
