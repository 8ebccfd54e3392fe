"""`traditional` / `simplified`: the query converted by OpenCC (Open Chinese Convert), phrase by
phrase with its own dictionaries, as a user of the other script would type it."""

from __future__ import annotations

import random
from functools import lru_cache
from importlib import metadata
from typing import Any

from retrieval_bench.errors import ConfigError
from retrieval_bench.perturb.base import Variant
from retrieval_bench.records import EvalQuery

UNCHANGED = "OpenCC changed no character"


@lru_cache(maxsize=8)
def converter(config: str, key: str = "opencc") -> Any:
    """OpenCC's converter for one configuration (`s2t`, `t2s`, `s2tw`, ...), built once; an
    unknown one is a ConfigError naming `key`, the option that gave it."""
    import opencc

    try:
        return opencc.OpenCC(config)
    except Exception as exc:  # OpenCC raises its own errors for an unknown configuration
        raise ConfigError(key, f"OpenCC has no configuration {config!r}: {exc}") from None


def opencc_version() -> str:
    return metadata.version("opencc")


class OpenCCConvert:
    """A kind that converts the whole query with one OpenCC configuration."""

    def __init__(self, kind: str, config: str, key: str) -> None:
        self.kind = kind
        self.config = config
        self._convert = converter(config, key).convert

    def library(self) -> str:
        return f"OpenCC {opencc_version()} ({self.config})"

    def apply(self, query: EvalQuery, rng: random.Random) -> Variant | str:
        text = self._convert(query.query)
        if text == query.query:
            return UNCHANGED
        changed = sum(a != b for a, b in zip(query.query, text, strict=False))
        changed += abs(len(text) - len(query.query))
        return Variant(text, {"opencc": self.config, "changed_chars": changed})
