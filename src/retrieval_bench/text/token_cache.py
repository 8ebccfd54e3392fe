"""On-disk cache of the tokenised corpus, so BM25 never runs jieba twice on the same corpus.

Why: jieba tokenises ~135k characters per second on one core here, so a 50,000-passage corpus
(~7M characters) costs ~55 s per job and a million passages ~15 minutes, while indexing the
tokens takes about a second. Every job of a sweep and every monthly run on an unchanged corpus
would pay that again. The cache stores the corpus as term ids (first-occurrence order, which is
also rank_bm25's vocabulary order), so a hit skips the per-token Python work as well: the BM25
index is built straight from arrays (`SparseBM25.from_term_ids`).

Layout: `<root>/<key[:2]>/<key>.npz` holding `ids` (int32, every passage's term ids back to
back), `lengths` (int64, tokens per passage), `vocab_utf8` (uint8, the vocabulary's UTF-8
text) and `vocab_ends` (int64, character offset where each term ends). Plain arrays loaded with
`allow_pickle=False`; written to a temp file, fsynced and `os.replace`d under an exclusive lock,
like the embedding cache; an unreadable or inconsistent entry is logged and rebuilt.

The key is a sha256 over the cache format, the tokenizer's identity (jieba version, lexicon,
settings) and the texts, each length-prefixed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing
import time
import zipfile
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from itertools import chain, islice
from pathlib import Path
from typing import Any

import numpy as np

from retrieval_bench.io.atomic import atomic_writer
from retrieval_bench.io.hashing import update_len_prefixed, update_texts
from retrieval_bench.io.locks import file_lock, lock_path_for, remove_stale_temps
from retrieval_bench.progress import progress

log = logging.getLogger(__name__)

TOKEN_CACHE_FORMAT = 1
FROM_TOKENS_CHUNK = 4096
"""Passages numbered per pass in `TokenizedCorpus.from_tokens` (their token lists are alive
together; a few MB)."""


@dataclass(frozen=True)
class TokenizedCorpus:
    """A corpus as term ids: passage j's tokens are `vocab[i]` for the next `lengths[j]` ids."""

    vocab: list[str]
    ids: np.ndarray
    lengths: np.ndarray
    cached: bool = False
    # How long tokenising took (now, or when the cache entry was written; None: written
    # before it was recorded), and the cache entry's size on disk.
    cold_seconds: float | None = None
    disk_bytes: int = 0

    def __len__(self) -> int:
        return len(self.lengths)

    def without_tokens(self) -> TokenizedCorpus:
        """Where this corpus came from and what it cost (`cached`, `cold_seconds`,
        `disk_bytes`) without its tokens (no vocabulary, ids or lengths): what an index keeps
        of it once built."""
        empty = np.zeros(0, dtype=np.int64)
        return replace(self, vocab=[], ids=np.zeros(0, dtype=np.int32), lengths=empty)

    def token_lists(self) -> list[list[str]]:
        """The token lists themselves (what rank_bm25 takes)."""
        words = np.asarray(self.vocab, dtype=object)
        if len(self.lengths) == 0:
            return []
        parts = np.split(words[self.ids], np.cumsum(self.lengths)[:-1])
        return [part.tolist() for part in parts]

    @classmethod
    def from_tokens(cls, token_lists: Iterable[Sequence[str]]) -> TokenizedCorpus:
        """Number terms by first occurrence in C-level passes (a defaultdict numbering itself
        by its own length), `FROM_TOKENS_CHUNK` passages at a time: given an iterator (the
        tokenizer's output as it comes), only that many passages' token lists exist at once,
        since a token list costs ~88 bytes per token (5 GB for a million passages) against 4
        for its id."""
        numbering: defaultdict[str, int] = defaultdict()
        numbering.default_factory = numbering.__len__
        id_parts: list[np.ndarray] = []
        length_parts: list[np.ndarray] = [np.zeros(0, dtype=np.int64)]
        passages = iter(token_lists)
        while True:
            chunk = list(islice(passages, FROM_TOKENS_CHUNK))
            if not chunk:
                break
            lengths = np.fromiter(map(len, chunk), dtype=np.int64, count=len(chunk))
            id_parts.append(
                np.fromiter(
                    map(numbering.__getitem__, chain.from_iterable(chunk)),
                    dtype=np.int32,
                    count=int(lengths.sum()),
                )
            )
            length_parts.append(lengths)
            del chunk  # before the next chunk is read, not after
        ids = np.concatenate(id_parts) if id_parts else np.zeros(0, dtype=np.int32)
        return cls(list(numbering), ids, np.concatenate(length_parts))


def token_cache_key(identity: dict[str, Any], texts: Sequence[str]) -> str:
    digest = hashlib.sha256()
    header = json.dumps(
        {"format": TOKEN_CACHE_FORMAT, "tokenizer": identity},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    ).encode()
    update_len_prefixed(digest, header)
    update_texts(digest, texts)
    return digest.hexdigest()


def tokenize_corpus(
    texts: Sequence[str],
    tokenize: Callable[[str], list[str]],
    identity: dict[str, Any],
    root: Path | str | None,
    workers: int = 1,
) -> TokenizedCorpus:
    """The corpus tokenised, from `root` when a valid entry exists, else tokenised and stored.

    `identity` must change whenever `tokenize` would produce different tokens; `root=None`
    disables the cache. With `workers > 1` a miss is tokenised by that many processes
    (`tokenize` must then pickle: `text.Tokenizer` does); the term ids are the same as one
    process gives, so the entry does not depend on `workers`.
    """
    if root is None:
        return _timed_tokenize(tokenize, texts, workers)
    key = token_cache_key(identity, texts)
    path = Path(root) / key[:2] / f"{key}.npz"
    if path.exists():
        found = _read(path, len(texts))
        if found is not None:
            return found
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = lock_path_for(path)
    with file_lock(lock, f"the token cache entry of {len(texts)} passages"):
        remove_stale_temps(Path(root), lock)  # left by writers killed mid-write
        if path.exists():  # written by another job while this one waited
            found = _read(path, len(texts))
            if found is not None:
                return found
        log.info("tokenising %d passages (not in the token cache)", len(texts))
        log.debug("token cache key %s", key)
        corpus = _timed_tokenize(tokenize, texts, workers)
        _write(path, corpus)
        return replace(corpus, disk_bytes=path.stat().st_size)


def _timed_tokenize(
    tokenize: Callable[[str], list[str]], texts: Sequence[str], workers: int
) -> TokenizedCorpus:
    start = time.perf_counter()
    corpus = _tokenize(tokenize, texts, workers)
    return replace(corpus, cold_seconds=time.perf_counter() - start)


def _tokenize(
    tokenize: Callable[[str], list[str]], texts: Sequence[str], workers: int
) -> TokenizedCorpus:
    if workers > 1 and len(texts) >= PARALLEL_MIN_PASSAGES:
        return _tokenize_parallel(tokenize, texts, workers)
    return TokenizedCorpus.from_tokens(_tokenize_all(tokenize, texts))


PARALLEL_MIN_PASSAGES = 2_000
"""Below this, starting worker processes (each imports jieba and loads its dictionary, ~1 s)
costs more than it saves, so the corpus is tokenised in this process whatever `workers` says."""
_CHUNK_PASSAGES = 2_000
"""Passages per task: small enough to balance the workers, large enough that each result
(one small vocabulary and an id array) costs little to send back."""

_worker_tokenize: list[Callable[[str], list[str]]] = []


def _init_worker(tokenize: Callable[[str], list[str]]) -> None:
    """Runs once in each worker: unpickling a `text.Tokenizer` builds its own jieba with the
    lexicon there, so every task after it reuses the loaded dictionary."""
    _worker_tokenize[:] = [tokenize]


def _tokenize_chunk(texts: Sequence[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """One chunk as (its vocabulary in first-occurrence order, term ids, lengths)."""
    (tokenize,) = _worker_tokenize
    chunk = TokenizedCorpus.from_tokens([tokenize(t) for t in texts])
    return chunk.vocab, chunk.ids, chunk.lengths


def _tokenize_parallel(
    tokenize: Callable[[str], list[str]], texts: Sequence[str], workers: int
) -> TokenizedCorpus:
    """Contiguous chunks tokenised by `workers` spawned processes, merged in corpus order.

    Each chunk numbers its terms by first occurrence within the chunk; renumbering chunk by
    chunk in corpus order, a term unseen in earlier chunks taking the next global id, gives
    exactly the first-occurrence numbering of one pass over the whole corpus.

    Workers are forked where the platform can (Linux): they inherit the tokenizer with jieba's
    dictionary and the lexicon already loaded (this process tokenises one passage first to
    load them), where a spawned worker would spend about a second loading them again. They run
    only jieba and numpy's fromiter, no thread pools, so a fork is safe even when this process
    has threads (torch, FAISS). Elsewhere they are spawned and the initializer unpickles the
    tokenizer (`text.Tokenizer` rebuilds its jieba and lexicon there).
    """
    size = max(1, min(_CHUNK_PASSAGES, -(-len(texts) // (workers * 4))))
    chunks = [list(texts[i : i + size]) for i in range(0, len(texts), size)]
    numbering: dict[str, int] = {}
    all_ids: list[np.ndarray] = []
    all_lengths: list[np.ndarray] = []
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    tokenize(texts[0])  # loads jieba's dictionary here, once, for forked workers to inherit
    log.info("tokenising %d passages with %d worker processes", len(texts), workers)
    with (
        ProcessPoolExecutor(workers, context, _init_worker, (tokenize,)) as pool,
        progress("tokenising passages", len(texts), "passage") as bar,
    ):
        for vocab, ids, lengths in pool.map(_tokenize_chunk, chunks):
            remap = np.fromiter(
                (numbering.setdefault(term, len(numbering)) for term in vocab),
                dtype=np.int32,
                count=len(vocab),
            )
            all_ids.append(remap[ids] if len(ids) else ids)
            all_lengths.append(lengths)
            bar.update(len(lengths))
    return TokenizedCorpus(
        list(numbering),
        np.concatenate(all_ids).astype(np.int32, copy=False),
        np.concatenate(all_lengths).astype(np.int64, copy=False),
    )


def _tokenize_all(
    tokenize: Callable[[str], list[str]], texts: Sequence[str]
) -> Iterator[list[str]]:
    """jieba over the corpus as it is consumed (`from_tokens` numbers it chunk by chunk, so
    the whole corpus's token lists never exist at once), reporting progress when it takes a
    while (progress.py)."""
    return (tokenize(t) for t in progress("tokenising passages", len(texts), "passage", texts))


def _read(path: Path, count: int) -> TokenizedCorpus | None:
    try:
        with np.load(path, allow_pickle=False) as data:
            ids, lengths = data["ids"], data["lengths"]
            text = data["vocab_utf8"].tobytes().decode("utf-8", errors="surrogatepass")
            ends = data["vocab_ends"]
            took = float(data["tokenize_s"]) if "tokenize_s" in data.files else None
            took = None if took is None or np.isnan(took) else took
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        log.warning("token cache entry %s is unreadable (%s); rebuilding it", path, exc)
        return None
    starts = np.concatenate(([0], ends[:-1])).tolist() if len(ends) else []
    vocab = [text[s:e] for s, e in zip(starts, ends.tolist(), strict=True)]
    problem = None
    if ids.dtype != np.int32 or lengths.dtype != np.int64:
        problem = "wrong dtypes"
    elif len(lengths) != count or int(lengths.sum()) != len(ids):
        problem = f"holds {len(lengths)} passages / {len(ids)} ids, expected {count} passages"
    elif len(ids) and (int(ids.min()) < 0 or int(ids.max()) >= len(vocab)):
        problem = "term ids outside the vocabulary"
    elif len(ends) and ends[-1] != len(text):
        problem = "vocabulary offsets do not match its text"
    if problem:
        log.warning("token cache entry %s is inconsistent (%s); rebuilding it", path, problem)
        return None
    log.debug("token cache hit: %d passages from %s", count, path)
    return TokenizedCorpus(vocab, ids, lengths, True, took, path.stat().st_size)


def _write(path: Path, corpus: TokenizedCorpus) -> None:
    text = "".join(corpus.vocab)
    ends = np.cumsum(np.fromiter(map(len, corpus.vocab), np.int64, len(corpus.vocab)))
    blob = np.frombuffer(text.encode("utf-8", errors="surrogatepass"), dtype=np.uint8)
    with atomic_writer(path) as fh:
        np.savez(
            fh,
            ids=corpus.ids.astype(np.int32, copy=False),
            lengths=corpus.lengths.astype(np.int64, copy=False),
            vocab_utf8=blob,
            vocab_ends=ends,
            # How long tokenising took, so a job reading the entry can state its cold cost.
            tokenize_s=np.float64(
                corpus.cold_seconds if corpus.cold_seconds is not None else np.nan
            ),
        )
