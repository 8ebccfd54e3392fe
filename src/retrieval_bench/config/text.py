"""The tokeniser's typed settings (`text.*`); the tokeniser itself is `text.tokenizer`."""

from __future__ import annotations

import os
from dataclasses import dataclass

from retrieval_bench.errors import ConfigError


@dataclass(unsafe_hash=True)  # mutable for Hydra overrides, hashable for the tokenizer memo
class TextConfig:
    """Tokeniser settings; each one but `workers` changes the BM25 index, so all of them but
    `workers` enter its cache key (Tokenizer.identity)."""

    use_lexicon: bool = True
    hmm: bool = True
    drop_punctuation: bool = True
    # Rewrite an alias token to its entity's canonical name, so "蜈支洲" in a query matches
    # "蜈支洲岛" in a passage; the lexicon's own words are the only ones rewritten.
    canonical_entities: bool = True
    # Processes that tokenise the corpus on a token-cache miss (0: one per CPU core). Any count
    # gives the same token ids; corpora under 2,000 passages are tokenised in-process.
    workers: int = 1

    def resolved_workers(self) -> int:
        """`workers`, with 0 read as the CPU cores this process may use."""
        if self.workers < 0:
            raise ConfigError(
                "text.workers", f"must be >= 0 (0: one per CPU core), got {self.workers}"
            )
        if self.workers == 0:
            return (
                len(os.sched_getaffinity(0))
                if hasattr(os, "sched_getaffinity")
                else (os.cpu_count() or 1)
            )
        return self.workers
