"""Realistic Chinese token corpora of any size for the BM25 and scale benchmarks.

Real text first: cmrc2018's 1,104 paragraphs (../shared/benchmarks/cmrc2018) are cut into
sentence-level chunks and tokenised with the project's jieba tokenizer; its 1,000 questions are
the queries. That is ~5k real passages; the rest are synthetic passages drawn from the empirical
jieba token statistics of cmrc2018:

* length: drawn from the real chunks' token-length distribution;
* burstiness: half of a passage's tokens come from one real paragraph (its "topic"), so terms
  repeat within a passage as they do in real text (BM25's tf saturation matters);
* the other half from the corpus-wide unigram distribution, where the Good-Turing unseen mass
  (share of tokens that are hapax legomena, ~10% in cmrc2018) goes to a Zipf tail of new words,
  so the vocabulary keeps growing with corpus size as real vocabularies do (Heaps' law).

Without ../shared (a fresh checkout) the same generator runs on a synthetic Zipf vocabulary of
CJK strings, and says so.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CMRC = ROOT.parent / "shared" / "benchmarks" / "cmrc2018"
TAIL_WORDS = 2_000_000
_SENTENCE_END = re.compile(r"(?<=[。！？；!?;])")


@dataclass
class TokenCorpus:
    """Passages and queries as token lists (what BM25 indexes), plus where they came from."""

    passages: list[list[str]]
    queries: list[list[str]]
    source: str
    n_real: int
    texts: list[str] | None = None  # the real chunks' text (for jieba throughput)


def sentence_chunks(text: str, max_chars: int = 160) -> list[str]:
    """Consecutive sentences grouped up to max_chars: the chunking a RAG index would use."""
    chunks: list[str] = []
    current = ""
    for sentence in (s.strip() for s in _SENTENCE_END.split(text)):
        if not sentence:
            continue
        if current and len(current) + len(sentence) > max_chars:
            chunks.append(current)
            current = ""
        current += sentence
    if current:
        chunks.append(current)
    return chunks


def _cjk_words(rng: np.random.Generator, n: int) -> np.ndarray:
    """n random 2-character CJK strings (object array): stand-ins for unseen words."""
    codes = rng.integers(0x4E00, 0x9FA6, size=(n, 2)).astype(np.uint32)
    return np.ascontiguousarray(codes).view("<U2").ravel().astype(object)


@dataclass
class _Stats:
    vocab: np.ndarray  # object array of words; real words first, then the tail
    unigram: np.ndarray  # probability of each word in `vocab`
    topics: list[np.ndarray]  # token ids of each real paragraph
    lengths: np.ndarray  # empirical passage lengths (tokens)


def _stats_from(
    token_lists: list[list[str]], chunk_lengths: np.ndarray, rng: np.random.Generator
) -> _Stats:
    words: dict[str, int] = {}
    topics = [
        np.fromiter((words.setdefault(t, len(words)) for t in toks), np.int64, len(toks))
        for toks in token_lists
    ]
    counts = np.bincount(np.concatenate(topics), minlength=len(words)).astype(np.float64)
    unseen = float((counts == 1).sum()) / counts.sum()  # Good-Turing: P(next token is new)
    tail = 1.0 / (len(words) + np.arange(1, TAIL_WORDS + 1, dtype=np.float64))  # Zipf, s=1
    probs = np.concatenate([counts / counts.sum() * (1 - unseen), tail / tail.sum() * unseen])
    vocab = np.concatenate([np.array(list(words), dtype=object), _cjk_words(rng, TAIL_WORDS)])
    return _Stats(vocab, probs, topics, chunk_lengths)


def _synthetic_base(rng: np.random.Generator) -> tuple[list[list[str]], list[list[str]]]:
    """Fallback without cmrc2018: Zipf(1.07) paragraphs and queries over CJK strings."""
    vocab = _cjk_words(rng, 50_000)
    probs = 1.0 / np.arange(1, len(vocab) + 1) ** 1.07
    probs /= probs.sum()
    paras = [
        list(vocab[rng.choice(len(vocab), rng.integers(100, 400), p=probs)]) for _ in range(1104)
    ]
    queries = [
        list(vocab[rng.choice(len(vocab), rng.integers(4, 14), p=probs)]) for _ in range(1000)
    ]
    return paras, queries


def load_real(tokenize) -> tuple[list[list[str]], list[list[str]], list[str], list[str]] | None:
    """(paragraph tokens, chunk tokens, chunk texts, query tokens) of cmrc2018, or None."""
    if not (CMRC / "corpus.jsonl").exists():
        return None
    docs = [json.loads(line) for line in (CMRC / "corpus.jsonl").open(encoding="utf-8")]
    queries = [json.loads(line)["text"] for line in (CMRC / "queries.jsonl").open(encoding="utf-8")]
    chunks = [c for d in docs for c in sentence_chunks(d["text"])]
    paras = [tokenize(f"{d.get('title', '')}\n{d['text']}") for d in docs]
    return paras, [tokenize(c) for c in chunks], chunks, [tokenize(q) for q in queries]


def corpus_stream(
    n_passages: int,
    n_queries: int = 200,
    seed: int = 0,
    real: tuple | None = None,
    synthetic_only: bool = False,
    chunk: int = 100_000,
) -> CorpusStream:
    """build_corpus's passages without holding them: the same token lists in the same order
    (the same seed draws the same numbers), generated `chunk` passages at a time, so that 10M
    passages take the memory of one chunk (CorpusStream)."""
    rng = np.random.default_rng(seed)
    if real is None and not synthetic_only:
        from retrieval_bench.config.text import TextConfig
        from retrieval_bench.text.tokenizer import Tokenizer

        real = load_real(Tokenizer(TextConfig(use_lexicon=False)).tokenize)
        if real is None:
            print(
                f"note: {CMRC} is absent; using a synthetic Zipf vocabulary instead of cmrc2018",
                file=sys.stderr,
            )
    if real is None:
        paras, queries = _synthetic_base(rng)
        chunks = [p[i : i + 60] for p in paras for i in range(0, len(p), 60)]
        texts = None
        source = "synthetic Zipf text" + ("" if synthetic_only else " (cmrc2018 absent)")
    else:
        paras, chunks, texts, queries = real
        source = "cmrc2018 chunks + synthetic from cmrc2018 token statistics"
    chunk_lengths = np.array([len(c) for c in chunks], dtype=np.int64)
    stats = _stats_from(paras, chunk_lengths, rng)
    real_part = list(chunks[:n_passages])
    synthesis = _Synthesis(stats, n_passages - len(real_part), rng, chunk)
    n_real = 0 if texts is None else len(real_part)
    return CorpusStream(real_part, synthesis, queries[:n_queries], source, n_real, texts)


def build_corpus(
    n_passages: int,
    n_queries: int = 200,
    seed: int = 0,
    real: tuple | None = None,
    synthetic_only: bool = False,
) -> TokenCorpus:
    """`n_passages` token lists: cmrc2018's real chunks, then synthetic ones (module docstring).

    `real` is `load_real`'s result when the caller already has it; `synthetic_only` skips
    cmrc2018 (and jieba) altogether, for smoke runs.
    """
    stream = corpus_stream(n_passages, n_queries, seed, real, synthetic_only)
    passages = [p for part in stream.chunks() for p in part]
    return TokenCorpus(passages, stream.queries, stream.source, stream.n_real, stream.texts)


def _skip(rng: np.random.Generator, draws: int) -> None:
    """Move `rng` past `draws` doubles (what `rng.random(draws)` would consume) without
    drawing them. PCG64 steps once per double; `advance` also clears the buffered 32-bit half
    that bounded integers leave behind, which the skipped doubles would not have touched, so it
    is put back."""
    state = rng.bit_generator.state
    assert state["bit_generator"] == "PCG64", state["bit_generator"]
    rng.bit_generator.advance(draws)
    after = rng.bit_generator.state
    after["has_uint32"], after["uinteger"] = state["has_uint32"], state["uinteger"]
    rng.bit_generator.state = after


def _generator(state: dict[str, Any]) -> np.random.Generator:
    rng = np.random.Generator(np.random.PCG64())
    rng.bit_generator.state = state
    return rng


class _Synthesis:
    """The synthetic passages, chunk by chunk. The whole-corpus version drew, in this order:
    every passage's length, a uniform per token (its unigram word), a topic per passage, a
    uniform per token (topic half or not) and a uniform per topic token (its place in the
    topic). Here the per-passage draws are made up front (n numbers) and each per-token stream
    is a generator of its own started where the whole-corpus draw would have started (`_skip`),
    read one chunk at a time: the same numbers, so the same tokens."""

    def __init__(self, stats: _Stats, n: int, rng: np.random.Generator, chunk: int) -> None:
        self.stats, self.n, self.chunk = stats, max(n, 0), chunk
        self.lengths = np.zeros(0, np.int64)
        self.topic_of_doc = np.zeros(0, np.int64)
        self._starts: list[tuple[dict, dict, dict]] = []
        if n <= 0:
            return
        self.lengths = rng.choice(stats.lengths, n)
        total = int(self.lengths.sum())
        words = rng.bit_generator.state
        _skip(rng, total)
        self.topic_of_doc = rng.integers(0, len(stats.topics), n)
        halves = rng.bit_generator.state
        _skip(rng, total)
        self._starts = [(words, halves, rng.bit_generator.state)]
        # Generator.choice(p=...) draws against this cdf.
        self.cdf = stats.unigram.cumsum()
        self.cdf /= self.cdf[-1]
        self.topic_sizes = np.array([len(t) for t in stats.topics])
        self.topic_flat = np.concatenate(stats.topics)
        self.topic_start = np.cumsum(self.topic_sizes) - self.topic_sizes

    @property
    def n_chunks(self) -> int:
        return -(-self.n // self.chunk)

    def part(self, c: int) -> list[list[str]]:
        """Chunk `c`'s passages (the chunks before it are generated first if they never were:
        each chunk's draws start where the previous chunk's ended)."""
        while len(self._starts) <= c:
            self.part(len(self._starts) - 1)
        word_rng, half_rng, place_rng = (_generator(s) for s in self._starts[c])
        a, b = c * self.chunk, min(self.n, (c + 1) * self.chunk)
        lengths = self.lengths[a:b]
        total = int(lengths.sum())
        ids = self.cdf.searchsorted(word_rng.random(total), side="right")
        from_topic = half_rng.random(total) < 0.5
        doc_of = np.repeat(np.arange(a, b), lengths)
        t = self.topic_of_doc[doc_of[from_topic]]
        place = place_rng.random(int(from_topic.sum()))
        ids[from_topic] = self.topic_flat[
            self.topic_start[t] + (place * self.topic_sizes[t]).astype(np.int64)
        ]
        if len(self._starts) == c + 1:
            self._starts.append(
                tuple(g.bit_generator.state for g in (word_rng, half_rng, place_rng))
            )
        words = self.stats.vocab[ids]
        return [part.tolist() for part in np.split(words, np.cumsum(lengths)[:-1])]


@dataclass
class CorpusStream:
    """A corpus read chunk by chunk: cmrc2018's real chunks (held: a few thousand), then the
    synthetic passages (generated as read)."""

    real: list[list[str]]
    synthesis: _Synthesis
    queries: list[list[str]]
    source: str
    n_real: int
    texts: list[str] | None = None

    @property
    def n(self) -> int:
        return len(self.real) + self.synthesis.n

    @property
    def n_tokens(self) -> int:
        return sum(map(len, self.real)) + int(self.synthesis.lengths.sum())

    def chunks(self) -> Iterator[list[list[str]]]:
        """Every passage's tokens, in order, a chunk at a time."""
        if self.real:
            yield self.real
        for c in range(self.synthesis.n_chunks):
            yield self.synthesis.part(c)

    def tokens(self, i: int) -> list[str]:
        """Passage `i`'s tokens (regenerates its chunk)."""
        if i < len(self.real):
            return self.real[i]
        i -= len(self.real)
        return self.synthesis.part(i // self.synthesis.chunk)[i % self.synthesis.chunk]
