"""The tests' stand-ins: `ScriptedArm`, the one fake arm (its rankings are scripted, over the ten
`PASSAGES` of three cities, or its answer is given whole), `TitleArm`/`TitleSpec`, a caller's
own arm as README's library example writes one (it ranks by title overlap), and
`CountingEncoder`, an encoder that counts what it encodes."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from retrieval_bench import BuildContext
from retrieval_bench.records import EvalQuery, Passage, Ranked

CITIES = ["三亚", "海口", "三亚", "", "海口", "三亚", "", "海口", "三亚", ""]
PASSAGES = [Passage(id=f"p{i}", text=f"text {i}", meta={"city": c}) for i, c in enumerate(CITIES)]


# What an answering ScriptedArm's `answer` is given: the arguments of `search`.
Answer = Callable[[Sequence[EvalQuery], int, Sequence[np.ndarray | None]], Any]


class ScriptedArm:
    """The tests' one fake arm: what it returns is scripted, never computed from a text.

    With a `script` (passage indices, best first) each query gets the script's passages its
    mask allows, cut to k, scored 10, 9, 8, ... (the arm contract). With an `answer`, `search`
    returns `answer(queries, k, allowed)` as it is: an arm that breaks the contract, or one
    that ranks at random (support.random_cases.random_answer). Either way it records the mask
    and the k of every query it was asked."""

    def __init__(
        self, name: str = "scripted", script: Sequence[int] = (), answer: Answer | None = None
    ) -> None:
        self.name = name
        self.script = list(script)
        self.answer = answer
        self.masks: list[np.ndarray | None] = []
        self.ks: list[int] = []

    def info(self) -> dict[str, int]:
        return {}

    def search(
        self, queries: Sequence[EvalQuery], k: int, allowed: Sequence[np.ndarray | None]
    ) -> Any:
        self.masks.extend(allowed)
        self.ks.extend([k] * len(allowed))
        if self.answer is not None:
            return self.answer(queries, k, allowed)
        out = []
        for mask in allowed:
            kept = [i for i in self.script if mask is None or mask[i]][:k]
            scores = 10.0 - np.arange(len(kept), dtype=np.float64)
            out.append(Ranked(np.array(kept, dtype=np.int64), scores, k))
        return out


class TitleArm:
    """A caller's own arm object: ranks passages whose title shares a character with the
    query, by how many it shares."""

    def __init__(self, passages: Sequence[Passage], ctx_tie: Any) -> None:
        self.titles = [set(p.title) for p in passages]
        self.tie = ctx_tie

    def search(
        self, queries: Sequence[EvalQuery], k: int, allowed: Sequence[np.ndarray | None]
    ) -> list[Ranked]:
        out = []
        for query, mask in zip(queries, allowed, strict=True):
            scores = np.array([len(set(query.query) & t) for t in self.titles], dtype=float)
            keep = scores > 0 if mask is None else (scores > 0) & mask
            idx, top = self.tie.top(np.flatnonzero(keep), scores[keep], k)
            out.append(Ranked(idx, top, k))
        return out

    def info(self) -> dict[str, Any]:
        return {"kind": "title_overlap"}


class TitleSpec:
    """The title-overlap arm as an ArmSpec: built against the job's corpus."""

    def build(self, name: str, ctx: BuildContext) -> TitleArm:
        return TitleArm(ctx.passages, ctx.tie_break)


class CountingEncoder:
    """Deterministic vectors from a hash of the text; counts how many texts it encoded."""

    def __init__(self, name: str = "counting", dim: int = 8, delay: float = 0.0) -> None:
        self.name = name
        self.dim = dim
        self.delay = delay
        self.encoded = 0

    def identity(self) -> dict[str, Any]:
        return {"kind": "fake", "model": self.name, "dim": self.dim}

    def _vectors(self, texts: list[str], salt: str) -> np.ndarray:
        time.sleep(self.delay)
        self.encoded += len(texts)
        rows = []
        for text in texts:
            seed = int.from_bytes(hashlib.sha256((salt + text).encode()).digest()[:8], "little")
            row = np.random.default_rng(seed).standard_normal(self.dim)
            rows.append(row / np.linalg.norm(row))
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), self.dim)

    def encode_passages(self, texts: list[str]) -> np.ndarray:
        return self._vectors(texts, "p:")

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self._vectors(texts, "q:")
