"""Plug-ins from outside the package that fail on purpose, one fault at a time: the plug-in
boundary's tests (tests/unit/job/test_plugin_boundary.py, tests/unit/encoders/
test_encoder_boundary.py) name them by `_target_` (`support.faulty_plugins.FaultyArmSpec`), as a
team's own plug-in is named. Each takes the fault as a keyword (`fault: raise_in_search`, ...;
the encoder as `encoder.model`, the one free string of its typed node); without one each
works: the arm ranks passages by position, the stage and combiner pass rankings on, the encoder
gives unit vectors from a hash of the text."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from retrieval_bench import BuildContext, EncoderConfig, EvalQuery, Ranked
from retrieval_bench.protocols import BEFORE_CUT
from retrieval_bench.tiebreak import TieBreak


class FaultError(RuntimeError):
    """What a faulty plug-in raises where its fault says."""


def _fail_if(fault: str, where: str) -> None:
    if fault == f"raise_in_{where}":
        raise FaultError(f"planted fault in {where}")


class FaultyArm:
    def __init__(self, n: int, fault: str) -> None:
        self.n, self.fault = n, fault

    def search(
        self, queries: Sequence[EvalQuery], k: int, allowed: Sequence[np.ndarray | None]
    ) -> list[Ranked]:
        _fail_if(self.fault, "search")
        out = []
        for mask in allowed:
            indices = np.arange(self.n, dtype=np.int64)
            if mask is not None:
                indices = indices[mask]
            indices = indices[:k]
            out.append(Ranked(indices, np.linspace(1.0, 0.5, len(indices)), k))
        return out

    def info(self) -> Any:
        _fail_if(self.fault, "info")
        if self.fault == "info_not_json":
            return {"index": object()}
        return {"kind": "faulty", "fault": self.fault}


class FaultyArmSpec:
    """`arms.<name>._target_: support.faulty_plugins.FaultyArmSpec`."""

    def __init__(self, fault: str = "", min_overlap: int = 1) -> None:
        _fail_if(fault, "init")
        self.fault = fault
        self.min_overlap = min_overlap

    def check(self, name: str, ctx: BuildContext) -> None:
        _fail_if(self.fault, "check")

    def build(self, name: str, ctx: BuildContext) -> Any:
        _fail_if(self.fault, "build")
        if self.fault == "built_without_search":
            return object()
        return FaultyArm(len(ctx.ids), self.fault)


class PaddingStage:
    """A stage before the cut that brings in passages it was not given (the fault
    `grow_before_cut`), or passes its input on."""

    def __init__(self, n: int, fault: str) -> None:
        self.n, self.fault = n, fault

    def apply(self, queries: Sequence[EvalQuery], rankings: Sequence[Ranked]) -> list[Ranked]:
        _fail_if(self.fault, "apply")
        if self.fault != "grow_before_cut":
            return list(rankings)
        out = []
        for ranked in rankings:
            extra = np.setdiff1d(np.arange(self.n, dtype=np.int64), ranked.indices)[:1]
            low = float(ranked.scores[-1]) - 1.0 if len(ranked.scores) else 0.0
            out.append(
                Ranked(
                    np.concatenate([ranked.indices, extra]),
                    np.concatenate([ranked.scores, np.full(len(extra), low)]),
                    ranked.requested,
                )
            )
        return out

    def info(self) -> dict[str, Any]:
        return {"kind": "padding"}


class FaultyStageSpec:
    """`stages.<name>._target_: support.faulty_plugins.FaultyStageSpec`, before the cut."""

    placement = BEFORE_CUT

    def __init__(self, fault: str = "") -> None:
        self.fault = fault

    def active(self, ctx: BuildContext) -> bool:
        _fail_if(self.fault, "active")
        return True

    def build(self, name: str, ctx: BuildContext) -> PaddingStage:
        _fail_if(self.fault, "stage_build")
        return PaddingStage(len(ctx.ids), self.fault)


class FirstPool:
    def combine(self, pools: Sequence[Ranked], tie_break: TieBreak) -> Ranked:
        return pools[0]


class FaultyCombinerSpec:
    """`combiners.<name>._target_: support.faulty_plugins.FaultyCombinerSpec`."""

    def __init__(self, fault: str = "") -> None:
        self.fault = fault

    def build(self, name: str, ctx: BuildContext, weights: tuple[float, ...] | None) -> Any:
        _fail_if(self.fault, "combiner_build")
        return object() if self.fault == "built_without_combine" else FirstPool()


class FaultyEncoder:
    """`encoder._target_: support.faulty_plugins.FaultyEncoder`, its fault in `encoder.model`:
    `nan_passages`, `nan_queries`, `norm3_passages`, `zero_queries`, `rows_passages`,
    `dim_queries`, or `raise_in_<init|identity|dimension|encode>`."""

    DIMENSION = 8

    def __init__(self, cfg: EncoderConfig) -> None:
        self.fault = cfg.model
        _fail_if(self.fault, "init")

    def identity(self) -> dict[str, Any]:
        _fail_if(self.fault, "identity")
        return {"kind": "faulty", "fault": self.fault}

    def dimension(self) -> int:
        _fail_if(self.fault, "dimension")
        return self.DIMENSION

    def _encode(self, texts: list[str], role: str) -> np.ndarray:
        _fail_if(self.fault, "encode")
        rows = []
        for text in texts:
            seed = int.from_bytes(hashlib.sha256(f"{role}:{text}".encode()).digest()[:8], "little")
            rows.append(np.random.default_rng(seed).standard_normal(self.DIMENSION))
        vectors = np.asarray(rows, dtype=np.float64).reshape(len(texts), self.DIMENSION)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        if self.fault == f"nan_{role}":
            vectors[len(texts) // 2, 3] = np.nan
        elif self.fault == f"norm3_{role}":
            vectors *= 3
        elif self.fault == f"zero_{role}":
            vectors[0] = 0.0
        elif self.fault == f"rows_{role}":
            vectors = vectors[:-1]
        elif self.fault == f"dim_{role}":
            vectors = np.hstack([vectors, vectors]) / np.sqrt(2)
        return vectors.astype(np.float32)

    def encode_passages(self, texts: list[str]) -> np.ndarray:
        return self._encode(texts, "passages")

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self._encode(texts, "queries")
