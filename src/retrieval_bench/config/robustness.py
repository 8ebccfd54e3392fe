"""The `robustness:` config node: which perturbed variants of the evaluation set a job runs beside
the originals (`retrieval_bench.perturb` makes them, `scoring.robustness` scores them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from retrieval_bench.errors import ConfigError, nearest_hint

# The perturbation kinds, each made by a well-kept library (retrieval_bench.perturb.kinds holds
# the implementations; a test checks the two lists agree). Named here so a config is checked
# without importing OpenCC, pypinyin or jieba.
KINDS = (
    "traditional",
    "simplified",
    "homophone",
    "fullwidth",
    "halfwidth",
    "mixed_script",
    "spacing",
    "unspacing",
    "truncate",
)
# `robustness.entities`: leave lexicon entities alone (homophone), or perturb inside them too.
ENTITY_MODES = ("protect", "too")


@dataclass
class RobustnessConfig:
    kinds: list[str] = field(metadata={"choices": KINDS}, default_factory=list)
    """Kinds whose variants the job makes from its own evaluation set (empty: none). Each variant
    is deterministic for `seed`; a kind that cannot change a query leaves it out (counted in
    metrics.json `robustness.kinds`)."""
    rate: float = 0.2
    """homophone: the share of a query's replaceable characters replaced, in (0, 1]."""
    seed: int = 0
    """Seeds every kind's variants, so the same seed makes the same perturbed queries."""
    entities: str = field(default="protect", metadata={"choices": ENTITY_MODES})
    """`protect`: leave the lexicon's entities alone (homophone); `too`: perturb inside them as
    well."""
    truncate_chars: int = 6
    """truncate: the characters kept (a typed-ahead query)."""
    opencc_traditional: str = "s2t"
    """The OpenCC configuration of the `traditional` kind."""
    opencc_simplified: str = "t2s"
    """The OpenCC configuration of the `simplified` kind."""
    sets: list[str] = field(default_factory=list)
    """Perturbed evaluation sets (`python -m run.perturb` output) run beside the originals; each
    variant's `meta.perturbed_from` must name a query of the job."""
    metrics: list[str] = field(default_factory=lambda: ["ndcg@K"])
    """Metrics whose paired difference (variant minus original) is tested per kind and type;
    `stable@K` (hit@K unchanged) is reported beside them."""

    @property
    def active(self) -> bool:
        return bool(self.kinds or self.sets)

    def validate(self) -> None:
        """Refuse the first bad key (ConfigError naming it)."""
        check_kinds(self.kinds, "robustness.kinds")
        check_rate(self.rate, "robustness.rate")
        if self.entities not in ENTITY_MODES:
            raise ConfigError(
                "robustness.entities", f"{self.entities!r} is not one of {', '.join(ENTITY_MODES)}"
            )
        if self.truncate_chars < 1:
            raise ConfigError(
                "robustness.truncate_chars",
                f"must be a positive integer, got {self.truncate_chars}",
            )
        if self.active and not self.metrics:
            raise ConfigError("robustness.metrics", "names no metric to test the variants on")


def check_kinds(kinds: list[str], key: str) -> None:
    """Every kind known and named once; ConfigError naming `key` and the nearest kind."""
    seen: set[str] = set()
    for kind in kinds:
        if kind not in KINDS:
            raise ConfigError(key, f"unknown kind {kind!r}; {nearest_hint(kind, list(KINDS))}")
        if kind in seen:
            raise ConfigError(key, f"names {kind!r} twice")
        seen.add(kind)


def check_rate(rate: float, key: str) -> None:
    if not 0.0 < rate <= 1.0:
        raise ConfigError(key, f"must be in (0, 1], got {rate}")
