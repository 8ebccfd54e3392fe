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
from dataclasses import dataclass
from pathlib import Path

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
    real_part = chunks[:n_passages]
    n_synth = n_passages - len(real_part)
    passages = list(real_part) + _synthesise(stats, n_synth, rng)
    n_real = 0 if texts is None else len(real_part)
    return TokenCorpus(passages, queries[:n_queries], source, n_real, texts)


def _synthesise(stats: _Stats, n: int, rng: np.random.Generator) -> list[list[str]]:
    if n <= 0:
        return []
    lengths = rng.choice(stats.lengths, n)
    total = int(lengths.sum())
    doc_of = np.repeat(np.arange(n), lengths)
    ids = rng.choice(len(stats.vocab), total, p=stats.unigram)
    # Topic half: tokens drawn from one real paragraph per passage.
    topic_of_doc = rng.integers(0, len(stats.topics), n)
    topic_sizes = np.array([len(t) for t in stats.topics])
    topic_flat = np.concatenate(stats.topics)
    topic_start = np.cumsum(topic_sizes) - topic_sizes
    from_topic = rng.random(total) < 0.5
    t = topic_of_doc[doc_of[from_topic]]
    pick = topic_start[t] + (rng.random(int(from_topic.sum())) * topic_sizes[t]).astype(np.int64)
    ids[from_topic] = topic_flat[pick]
    words = stats.vocab[ids]
    bounds = np.cumsum(lengths)[:-1]
    return [part.tolist() for part in np.split(words, bounds)]
