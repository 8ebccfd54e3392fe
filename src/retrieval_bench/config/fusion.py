"""The shipped combiners' keyword arguments (`combiners.rrf`, `combiners.score`,
`combiners.fill`), apart from the fusion code, so the schema imports no implementation. Each
fusion class (retrieval_bench.fusion) takes these fields as its keyword arguments; the
per-arm weights are the job's (`retriever.weights`), handed to `build`, never a node's key."""

from __future__ import annotations

from dataclasses import dataclass, field

from retrieval_bench.errors import ConfigError, nearest_hint

# RRF's k as Cormack et al. chose it (and fill's rank constant).
RRF_K = 60
NORMALIZATIONS = ("none", "minmax", "zscore")
METHODS = ("combsum", "combmnz")


@dataclass
class RRFConfig:
    """`combiners.rrf`: score(d) = sum of w / (k + rank)."""

    k: int = RRF_K
    """RRF's k, score(d) = sum of w / (k + rank), an integer >= 0: larger k flattens the
    difference between ranks."""

    def validate(self) -> None:
        check_rank_constant("k", self.k)


@dataclass
class FillConfig:
    """`combiners.fill`: the rank constant of its scores 1 / (k + position); the shipped node
    follows `combiners.rrf.k`."""

    k: int = RRF_K
    """The rank constant of fill's scores, 1 / (k + position), an integer >= 0."""

    def validate(self) -> None:
        check_rank_constant("k", self.k)


@dataclass
class ScoreFusionConfig:
    """`combiners.score`: each arm's scores normalised over its pool, then summed."""

    normalize: str = field(default="minmax", metadata={"choices": NORMALIZATIONS})
    """How each arm's scores are normalised over its pool before they are summed."""
    method: str = field(default="combsum", metadata={"choices": METHODS})
    """`combsum`: the sum of normalised scores; `combmnz`: that sum times the number of arms
    that returned the passage."""

    def validate(self) -> None:
        for key, value, known in (
            ("normalize", self.normalize, NORMALIZATIONS),
            ("method", self.method, METHODS),
        ):
            if value not in known:
                raise ConfigError(key, f"unknown value '{value}'; {nearest_hint(value, known)}")


def check_rank_constant(key: str, k: int) -> None:
    """RRF's and fill's k: an integer >= 0 (`key` names where it was set)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ConfigError(key, f"must be an integer >= 0, got {k!r}")
