"""The `compare:` config node: how a sweep's jobs are compared when the sweep ends."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from retrieval_bench.config.renamed import rename_key
from retrieval_bench.errors import ConfigError

# Holm families (`compare.family`) and what each spans, as reports say it.
FAMILY_SCOPE = {
    "cell": "each cell (one type x one metric)",
    "metric": "each metric (every type of it)",
    "table": "the whole table (every type x metric)",
}
FAMILIES = tuple(FAMILY_SCOPE)
# Multiple-testing corrections (`compare.correction`) and what each controls, as reports say it.
CORRECTIONS = {
    "holm": "Holm (family-wise error rate)",
    "bh": "Benjamini-Hochberg (false discovery rate)",
}

# `@K` stands for each job's own top_k, so a top_k 6 vs 8 ablation compares recall@6 with
# recall@8: what each setting actually returns.
DEFAULT_METRICS = ["recall@K", "hit@K", "mrr@K", "ndcg@K"]
# `compare.estimate`: the jobs' labels alone, or also a labelling plan's estimates.
ESTIMATES = ("labels", "active")


@dataclass
class CompareConfig:
    enabled: bool = True
    """Build the comparison at the end of a multirun (the Hydra callback)."""
    stage: str = "final"
    """The recorded stage whose metrics are compared (and that the monthly trend draws)."""
    metrics: list[str] = field(default_factory=lambda: list(DEFAULT_METRICS))
    """The metrics compared, each per query type (`@K`: each job's top_k)."""
    alpha: float = 0.05
    """The significance level of the paired test behind every verdict (after the family's
    correction)."""
    n_resamples: int = 10000
    """Resamples of the paired sign-flip test (and of its inverted confidence interval)."""
    confidence: float = 0.95
    """The level of every confidence interval reported."""
    seed: int = 0
    """Seeds every resampling of the comparison, so a comparison is reproducible."""
    min_queries: int = 5
    """A group with fewer paired queries gets no verdict ("too few queries to decide")."""
    baselines: list[Any] = field(default_factory=list)
    """The ablation baselines (empty: the first job of the sweep), each {top_k: 6} (YAML,
    `compare.baselines=[{top_k:6}]`), "top_k=6,retriever=bm25", or a bare value of a varying key:
    `compare.baselines=[bm25,dense]` (= `["retriever=bm25","retriever=dense"]` when the sweep
    varies `retriever`); every delta of the ablation says against which it was taken."""
    rank_resamples: int = 1000
    """The bootstrap interval of each configuration's rank in a tier table (`stats.tiers`): this
    many resamples of the queries, seeded by `seed`, at `confidence`."""
    weak_below: float = 0.5
    """The best configuration of a type is flagged "all weak" when its value is below this
    fraction of the metric's ideal bound there (recall_bound@K for recall, 1 for hit/mrr/ndcg)."""
    family: str = "table"
    """Holm family: "cell" (one type x one metric), "metric" (every type of a metric) or "table"
    (every type x metric of the table: the family a reader scans)."""
    correction: str = "holm"
    """Multiple-testing correction over a family: "holm" (family-wise error) or "bh"
    (Benjamini-Hochberg, false discovery rate)."""
    power: float = 0.8
    """Power analysis: the minimum detectable effect is stated at this power, and the queries
    needed are those that detect a difference of `target_delta` (in the metric's units)."""
    target_delta: float = 0.05
    """The difference, in the metric's units, whose queries-needed the power analysis reports."""
    estimate: str = "labels"
    """What the comparison's estimates rest on: `labels` (the jobs' labels, as they are) or
    `active` (also the estimates under a labelling plan, `label_plan`, with their verdicts:
    `python -m run.label`)."""
    label_plan: str = ""
    """With `estimate=active`: the plan's folder (`python -m run.label plan --out`)."""

    def baseline_key(self) -> str:
        """The key the baselines were given under, for messages about them."""
        return "compare.baselines"

    def baseline_settings(self) -> list[dict[str, Any]]:
        """Every baseline as KEY -> VALUE, a key of the old spelling read as its new home (the
        sweep's own overrides were rewritten so: config.renamed)."""
        out = []
        for i, item in enumerate(self.baselines):
            if _unset(item):
                raise ConfigError(f"compare.baselines[{i}]", "is empty; expected KEY=VALUE")
            setting = parse_setting(item, f"compare.baselines[{i}]")
            out.append({rename_key(key) or key: value for key, value in setting.items()})
        return out

    def validate(self) -> None:
        self.baseline_settings()
        if self.estimate not in ESTIMATES:
            raise ConfigError(
                "compare.estimate", f"{self.estimate!r} is not one of: {', '.join(ESTIMATES)}"
            )
        if self.estimate == "active" and not self.label_plan:
            raise ConfigError(
                "compare.label_plan",
                "compare.estimate=active needs the labelling plan's folder (python -m run.label "
                "plan --out DIR)",
            )
        if self.rank_resamples < 100:
            raise ConfigError(
                "compare.rank_resamples", f"must be >= 100, got {self.rank_resamples}"
            )
        if not self.metrics:
            raise ConfigError("compare.metrics", "needs at least one metric, e.g. recall@K")
        # The names themselves are checked against the metric registry (plug-ins add measures)
        # by job.check, which also maps ir_measures' spellings (`nDCG@10`) to the project's.
        if not 0 < self.alpha < 1:
            raise ConfigError("compare.alpha", f"must be within (0, 1), got {self.alpha}")
        if not 0 < self.confidence < 1:
            raise ConfigError("compare.confidence", f"must be within (0, 1), got {self.confidence}")
        if self.n_resamples < 100:
            raise ConfigError("compare.n_resamples", f"must be >= 100, got {self.n_resamples}")
        if self.family not in FAMILIES:
            raise ConfigError(
                "compare.family", f"{self.family!r} is not one of: {', '.join(FAMILIES)}"
            )
        if self.correction not in CORRECTIONS:
            raise ConfigError(
                "compare.correction",
                f"{self.correction!r} is not one of: {', '.join(CORRECTIONS)}",
            )
        if not 0 < self.power < 1:
            raise ConfigError("compare.power", f"must be within (0, 1), got {self.power}")
        if not 0 < self.target_delta <= 1:
            raise ConfigError(
                "compare.target_delta",
                f"is a difference in the metric's units, within (0, 1], got {self.target_delta}",
            )
        if not 0 < self.weak_below <= 1:
            raise ConfigError(
                "compare.weak_below",
                f"is a fraction of the ideal bound in (0, 1], got {self.weak_below}",
            )
        if self.min_queries < 1:
            raise ConfigError("compare.min_queries", f"must be >= 1, got {self.min_queries}")


def _unset(value: Any) -> bool:
    """No baseline: unset, an empty string or an empty mapping."""
    return value is None or value == "" or (isinstance(value, Mapping) and not value)


# The key of a baseline given as a bare value (`compare.baselines=[bm25,dense]`): the
# comparison resolves it to the one varying key that takes that value.
ANY_KEY = ""


def parse_setting(value: Any, key: str) -> dict[str, Any]:
    """One baseline as KEY -> VALUE: a mapping ({top_k: 6}), "KEY=VALUE[,KEY=VALUE]", or a
    bare value (`bm25`: {ANY_KEY: "bm25"}); a malformed one is refused naming `key`."""
    if isinstance(value, Mapping):
        return {str(k): v for k, v in value.items()}
    if "=" not in str(value) and "," not in str(value):
        return {ANY_KEY: str(value).strip()}
    out: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in str(value).split(","))):
        name, sep, setting = part.partition("=")
        if not sep or not name.strip():
            raise ConfigError(key, f"{value!r}: expected KEY=VALUE[,KEY=VALUE]")
        out[name.strip()] = setting.strip()
    if not out:
        raise ConfigError(key, f"{value!r}: expected KEY=VALUE[,KEY=VALUE]")
    return out
