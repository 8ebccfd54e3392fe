"""Parity of the fast cut with jieba: on whole corpora (`python -m run.tokens parity`) and on a
sample of each corpus before a job uses it (`text.parity_sample`).

Why: the fast engine is only worth having if its tokens are jieba's, so it is never used on
trust. Two things are compared per passage: the raw cut of the NFKC text (`Tokenizer.cut`: jieba's
`lcut` against the engine's, whitespace and punctuation included), then the indexed tokens
(the fast path normalises, drops and rewrites in C; the reference with unicodedata and Python).
A difference is reported with the passage, its text and both token lists.
"""

from __future__ import annotations

import hashlib
import logging
import multiprocessing
import unicodedata
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from retrieval_bench.errors import BenchError
from retrieval_bench.progress import progress
from retrieval_bench.text.segment.engine import FAST_NAME

if TYPE_CHECKING:
    from retrieval_bench.text.tokenizer import Tokenizer

log = logging.getLogger(__name__)

CHUNK = 1_000
"""Passages per task when several processes compare a corpus."""


@dataclass(frozen=True)
class Difference:
    """The first passage whose fast cut is not jieba's."""

    index: int
    passage_id: str
    stage: str  # "cut": jieba's raw segmentation; "tokens": the indexed tokens
    text: str  # as cut: NFKC
    reference: list[str]
    fast: list[str]

    def first_position(self) -> int:
        """Index of the first token where the two lists part."""
        for i, (a, b) in enumerate(zip(self.reference, self.fast, strict=False)):
            if a != b:
                return i
        return min(len(self.reference), len(self.fast))

    def describe(self) -> str:
        at = self.first_position()
        window = slice(max(0, at - 3), at + 4)
        return "\n".join(
            [
                f"passage {self.passage_id!r} (#{self.index}): the fast {self.stage} differs "
                f"from jieba's at token {at}: jieba {self.reference[window]} vs fast "
                f"{self.fast[window]}",
                f"text: {self.text}",
                f"jieba: {self.reference}",
                f"fast:  {self.fast}",
            ]
        )


class TokenParityError(BenchError):
    """`text.impl=fast_strict` and the fast cut differs from jieba on the job's corpus."""


Found = tuple[int, str, str, list[str], list[str]]
"""(index, stage, NFKC text, jieba's list, the fast list)"""


def compare_one(tokenizer: Tokenizer, text: str) -> tuple[str, str, list[str], list[str]] | None:
    """(stage, NFKC text, jieba's list, the fast list) where the two part, else None: first the
    raw cut of the same NFKC text, then the indexed tokens (the fast path normalises and
    finishes the tokens in C, the reference with unicodedata and Python)."""
    normalised = unicodedata.normalize("NFKC", text)
    reference = tokenizer.cut(normalised, reference=True)
    fast = tokenizer.cut(normalised)
    if reference != fast:
        return "cut", normalised, reference, fast
    reference_tokens, fast_tokens = tokenizer.finish_all(reference), tokenizer.tokenize(text)
    if reference_tokens != fast_tokens:
        return "tokens", normalised, reference_tokens, fast_tokens
    return None


def _first_in(tokenizer: Tokenizer, texts: Sequence[str], offset: int) -> Found | None:
    for i, text in enumerate(texts):
        found = compare_one(tokenizer, text)
        if found is not None:
            return (offset + i, *found)
    return None


_worker: list[Tokenizer] = []


def _init(tokenizer: Tokenizer) -> None:
    _worker[:] = [tokenizer]


def _chunk(task: tuple[int, Sequence[str]]) -> Found | None:
    return _first_in(_worker[0], task[1], task[0])


def first_difference(
    tokenizer: Tokenizer,
    texts: Sequence[str],
    ids: Sequence[str] | None = None,
    workers: int = 1,
    label: str = "checking token parity",
) -> Difference | None:
    """The first passage of `texts` whose fast cut differs from jieba's, or None.

    `tokenizer` must cut with the fast engine (`tokenizer.impl == FAST_NAME`); with
    `workers > 1` contiguous chunks are compared in that many forked processes, and the
    difference reported is still the first in corpus order.
    """
    if tokenizer.impl != FAST_NAME:
        raise ValueError(f"the tokenizer cuts with {tokenizer.impl!r}, not the fast engine")
    found = None
    if workers > 1 and len(texts) > CHUNK:
        tasks = [(i, list(texts[i : i + CHUNK])) for i in range(0, len(texts), CHUNK)]
        methods = multiprocessing.get_all_start_methods()
        context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
        with (
            ProcessPoolExecutor(workers, context, _init, (tokenizer,)) as pool,
            progress(label, len(texts), "passage") as bar,
        ):
            for (_, chunk), result in zip(tasks, pool.map(_chunk, tasks), strict=True):
                bar.update(len(chunk))
                if result is not None:
                    found = result
                    break  # map yields in order: this is the first difference
    else:
        for i, text in enumerate(progress(label, len(texts), "passage", texts)):
            one = compare_one(tokenizer, text)
            if one is not None:
                found = (i, *one)
                break
    if found is None:
        return None
    index, stage, normalised, reference, fast = found
    passage_id = ids[index] if ids is not None else str(index)
    return Difference(index, passage_id, stage, normalised, reference, fast)


def sample_indices(n: int, k: int) -> list[int]:
    """k passages spread evenly over a corpus of n (all of them when k >= n): deterministic,
    so a rerun checks the same passages."""
    if k >= n:
        return list(range(n))
    return sorted({(i * n) // k for i in range(k)})


_CHECKED = "_parity_checked"
"""The attribute under which a tokenizer keeps its parity results (sample digest -> the
difference or None): they live and die with it, with no weak-reference callbacks at exit."""


def checked_tokenizer(tokenizer: Tokenizer, texts: Sequence[str], ids: Sequence[str]) -> Tokenizer:
    """The tokenizer a job may use on this corpus: `tokenizer` itself unless it cuts with the
    fast engine and differs from jieba on `text.parity_sample` passages spread over the corpus.
    Then `text.impl=fast` falls back to jieba (a warning gives the passage and both token
    lists) and `fast_strict` raises TokenParityError. Checked once per tokenizer and sample in
    a process (a sweep's jobs share it)."""
    config = tokenizer.config
    if tokenizer.impl != FAST_NAME or config.parity_sample == 0 or not texts:
        return tokenizer
    picked = sample_indices(len(texts), config.parity_sample)
    digest = hashlib.sha256()
    for i in picked:
        digest.update(texts[i].encode("utf-8", "surrogatepass") + b"\0")
    checked: dict[str, Difference | None] = vars(tokenizer).setdefault(_CHECKED, {})
    key = digest.hexdigest()
    if key not in checked:
        sample = [texts[i] for i in picked]
        found = first_difference(tokenizer, sample, [ids[i] for i in picked])
        checked[key] = None if found is None else replace(found, index=picked[found.index])
    difference = checked[key]
    if difference is None:
        return tokenizer
    if config.impl == "fast_strict":
        raise TokenParityError(
            "config key 'text.impl': fast_strict refuses a fast cut that differs from jieba; "
            f"{difference.describe()}\nset text.impl=fast to fall back to jieba, or "
            "text.impl=jieba"
        )
    log.warning("text.impl=fast: falling back to jieba for this corpus; %s", difference.describe())
    from retrieval_bench.text.tokenizer import cached_tokenizer

    return cached_tokenizer(
        replace(config, impl="jieba"), tokenizer.lexicon_words, tuple(tokenizer.canonical.items())
    )
