"""`truncate`: the query cut to its first N characters, a query typed ahead or abandoned."""

from __future__ import annotations

import random

from retrieval_bench.perturb.base import Variant
from retrieval_bench.records import EvalQuery


class Truncate:
    kind = "truncate"

    def __init__(self, chars: int) -> None:
        self.chars = chars

    def library(self) -> str:
        return f"str slice (first {self.chars} characters)"

    def apply(self, query: EvalQuery, rng: random.Random) -> Variant | str:
        text = query.query[: self.chars].rstrip()
        if len(query.query.rstrip()) <= self.chars or not text:
            return f"at most {self.chars} characters already"
        return Variant(text, {"chars": self.chars, "cut": query.query[self.chars :]})
