"""The `benchmark:` config node: the monthly benchmark job and its regression gate.

Off by default; `python -m run experiment=monthly` (conf/experiment/monthly.yaml) turns it on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from retrieval_bench.config.judge import JUDGES, JudgeSettings
from retrieval_bench.errors import ConfigError

MONTH = re.compile(r"\d{4}-(0[1-9]|1[0-2])")
# benchmark.baseline_from: earlier months on this disk, or in the tracker (tracking=mlflow).
BASELINE_SOURCES = ("folder", "tracking")


@dataclass
class GateConfig:
    enabled: bool = True
    """Gate the month against its baseline (false: compare only; the month always passes)."""
    tolerances: dict[str, float] = field(default_factory=lambda: {"recall@K": 0.02, "ndcg@K": 0.02})
    """Gated metric -> the largest drop tolerated (absolute, in the metric's units). `@K` is each
    job's top_k. A drop fails the gate only when it exceeds the tolerance AND is significant
    (paired randomization test, Holm across every gated check of the run)."""
    types: list[str] = field(default_factory=list)
    """Query types gated; empty: every type and `all`."""
    alpha: float = 0.05
    """The significance level a drop must reach to fail the gate."""
    allow_plan_changes: list[str] = field(default_factory=list)
    """Plan differences from the baseline that do not fail the gate: config keys or key prefixes
    (`top_k`, `bm25`, `encoder.model`), `benchmark.datasets` / `benchmark.retrievers` (jobs added
    or dropped), `dataset.files` (the dataset's content changed). Every difference is named in
    the gate report, allowed or not; one not allowed fails the gate."""


@dataclass
class BenchmarkJudgeConfig(JudgeSettings):
    """`benchmark.judge`: grade the month's new pool entries with a model judge before the
    month is compared and gated (`python -m run.judge`'s settings: the same type,
    `config.judge.JudgeSettings`; kind `none`: off). The gate then scores both months against
    people's labels plus the judge's, and says which checks rest on the judge's labels."""

    depth: int = 0
    """Pool the top `depth` of every job's stage; 0: the month's top_k."""

    def validate(self) -> None:
        kinds = ("none", *JUDGES)
        if self.kind not in kinds:
            raise ConfigError(
                "benchmark.judge.kind",
                f"unknown judge {self.kind!r}; choose one of {', '.join(kinds)}",
            )
        if self.depth < 0:
            raise ConfigError("benchmark.judge.depth", f"must be >= 0, got {self.depth}")


@dataclass
class BenchmarkConfig:
    enabled: bool = False
    """Run the monthly benchmark instead of one job (`experiment=monthly` sets it)."""
    month: str = ""
    """YYYY-MM; empty: the current month. Every job of a run goes under <root>/<month>/."""
    root: str = "outputs/benchmarks"
    """The folder that holds one folder per month and the trend over them."""
    datasets: list[str] = field(default_factory=lambda: ["travel"])
    """Config group options run every month: each dataset x each retriever."""
    retrievers: list[str] = field(default_factory=lambda: ["bm25", "dense", "hybrid"])
    """Retriever options run every month, each on every dataset of `datasets`."""
    launcher: str = "basic"
    """hydra/launcher option for the jobs: basic, parallel (joblib), local / slurm (submitit)."""
    launcher_settings: dict[str, Any] = field(default_factory=dict)
    """hydra.launcher.<key> settings for the jobs' launcher, e.g. {partition: gpu} with launcher
    slurm (command line: +benchmark.launcher_settings.partition=gpu). Where the jobs run, not
    what they measure: no part of the month's plan."""
    baseline: str = "previous"
    """What to gate against: "previous" (the latest earlier finished month whose gate passed), a
    month (YYYY-MM) or the path of a benchmark month folder (a pinned baseline, used whatever its
    own gate said: how a deliberate change is accepted)."""
    baseline_from: str = field(default="folder", metadata={"choices": BASELINE_SOURCES})
    """Where earlier months are read from: `folder` (under benchmark.root, on this disk) or
    `tracking` (the tracker of tracking=mlflow: a CI runner that starts with an empty disk gates
    as it would with every earlier month on disk; retrieval_bench.tracking.restore)."""
    gate: GateConfig = field(default_factory=GateConfig)
    trend_metrics: list[str] = field(default_factory=list)
    """Metrics drawn in the trend report; empty: the gated metrics."""
    judge: BenchmarkJudgeConfig = field(default_factory=BenchmarkJudgeConfig)

    def validate(self) -> None:
        if not self.enabled:
            return
        if self.month and not MONTH.fullmatch(self.month):
            raise ConfigError("benchmark.month", f"expected YYYY-MM, got {self.month!r}")
        if self.baseline_from not in BASELINE_SOURCES:
            raise ConfigError(
                "benchmark.baseline_from",
                f"unknown source {self.baseline_from!r}; "
                f"choose one of {', '.join(BASELINE_SOURCES)}",
            )
        if not self.datasets:
            raise ConfigError("benchmark.datasets", "needs at least one dataset option")
        if not self.retrievers:
            raise ConfigError("benchmark.retrievers", "needs at least one retriever option")
        for key, values in (("datasets", self.datasets), ("retrievers", self.retrievers)):
            if len(set(values)) != len(values):
                raise ConfigError(f"benchmark.{key}", f"an option is listed twice: {values}")
            for value in values:
                if not re.fullmatch(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*", value):
                    raise ConfigError(f"benchmark.{key}", f"{value!r} is not a config option name")
        for key in self.launcher_settings:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                raise ConfigError(
                    f"benchmark.launcher_settings.{key}", "is not a hydra.launcher key name"
                )
        if not 0 < self.gate.alpha < 1:
            raise ConfigError(
                "benchmark.gate.alpha", f"must be within (0, 1), got {self.gate.alpha}"
            )
        for metric, tolerance in self.gate.tolerances.items():
            if tolerance < 0:
                raise ConfigError(
                    f"benchmark.gate.tolerances.{metric}", f"must be >= 0, got {tolerance}"
                )
        self.judge.validate()
        # The metric names are checked against the registry by job.check (plug-ins add some).
