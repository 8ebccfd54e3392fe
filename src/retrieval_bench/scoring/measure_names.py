"""Metric names a user may write, and the one place they are checked and mapped.

Every metric a stage reports (`metrics.json` overall / by_type) is `<name>@<K>`; config
(`compare.metrics`, `benchmark.gate.tolerances`, `benchmark.trend_metrics`) and the commands
(`run.compare --metric`) name one as `<name>@K` (K: each job's top_k) or `<name>@<int>`.
ir_measures / PyTerrier spell the common measures differently (`nDCG@10`, `R@100`); those
spellings (each measure's `ir_measures` in `scoring.registry`) are accepted and mapped here, so
a name copied from an ir_measures script means the same number. A name that is neither is
refused with the key at fault and the nearest known name: a typo never selects nothing
silently. ir_measures' `AP` without a cut-off is trec_eval's uncut map, which a job does not
report (its rankings are cut), so it must be written with one (`AP@10`, `AP@K`).
"""

from __future__ import annotations

from collections.abc import Sequence

from retrieval_bench.config.benchmark import BenchmarkConfig
from retrieval_bench.config.compare import CompareConfig
from retrieval_bench.config.robustness import RobustnessConfig
from retrieval_bench.errors import ConfigError, nearest_hint
from retrieval_bench.scoring.registry import (
    DOC,
    answer_measures,
    find,
    ir_measures_names,
    is_answer_measure,
    is_robustness_measure,
    known_metrics,
    reported,
    robustness_measures,
)


def canonical_metric(spec: str, key: str) -> str:
    """`spec` (`ndcg@10`, `nDCG@10`, `R@K`, ...) as the project names it (`ndcg@10`,
    `recall@K`); ConfigError naming `key` for a malformed or unknown name. An answer metric
    (`source_coverage`, `judge_faithfulness`: the registry's `answer` family) has no cut-off
    and stays as is."""
    if is_answer_measure(spec):
        return str(spec)
    spellings = ir_measures_names()
    name, sep, k = str(spec).partition("@")
    if not name or not sep or not (k == "K" or k.isdigit()):
        if name in spellings and not sep:
            raise ConfigError(
                key,
                f"{spec!r} has no cut-off: write {spec}@K (K: each job's top_k) or {spec}@<int>",
            )
        if not sep:  # perhaps a misspelt answer metric, which has no cut-off
            hint = nearest_hint(name, answer_measures())
            if hint.startswith("did you mean"):
                raise ConfigError(key, f"{spec!r} is not a metric: {hint}")
        raise ConfigError(key, f"{spec!r} is not METRIC@K or METRIC@<int>")
    if is_robustness_measure(name):  # stable@K: read from metrics.json's robustness section
        return f"{name}@{k}"
    known = known_metrics()
    name = spellings.get(name, name)
    if name not in known:
        hint = nearest_hint(name, [*known, *spellings, *robustness_measures()], suffix=f"@{k}")
        raise ConfigError(key, f"{spec!r} is not a metric: {hint}")
    return f"{name}@{k}"


def per_query_measure(
    spec: str, key: str, top_k: int, cutoffs: Sequence[int]
) -> tuple[str, int, bool]:
    """(measure name, cut-off, higher is better) of `spec` where a per-query value of a
    ranking is needed (what `run.tune` searches on, what a learned router learns): a doc
    measure with a value per query, at K (`top_k`) or a cut-off the job scores (`top_k` or
    one of `cutoffs`). ConfigError naming `key` otherwise."""
    spec = canonical_metric(spec, key)
    name, _, k_text = spec.partition("@")
    if name not in reported(DOC) or find(name).pooled is not None:
        options = [n for n in reported(DOC) if find(n).pooled is None]
        raise ConfigError(
            key,
            f"{spec!r}: needs a per-query measure of the ranking, "
            f"{nearest_hint(name, options, suffix='@K')}",
        )
    k = top_k if k_text == "K" else int(k_text)
    scored = sorted({top_k, *cutoffs})
    if k not in scored:
        raise ConfigError(
            key, f"{spec!r}: the job scores at {scored}; add scoring.cutoffs=[{k}] or use @K"
        )
    return name, k, find(name).higher_is_better


def canonical_compare_metrics(cfg: CompareConfig) -> None:
    """`compare.metrics` in the project's spelling, in place; an unknown name is refused naming
    its index."""
    cfg.metrics = [
        canonical_metric(name, f"compare.metrics[{i}]") for i, name in enumerate(cfg.metrics)
    ]


def canonical_robustness_metrics(cfg: RobustnessConfig) -> None:
    """`robustness.metrics` in the project's spelling, in place; `stable@K`, reported beside
    every one of them anyway, and unknown names are refused naming their index."""
    names = []
    for i, metric in enumerate(cfg.metrics):
        key = f"robustness.metrics[{i}]"
        name = canonical_metric(metric, key)
        if is_robustness_measure(name) or is_answer_measure(name):
            raise ConfigError(key, f"{name} is not tested per variant (stable@K is always shown)")
        names.append(name)
    cfg.metrics = names


def canonical_benchmark_metrics(cfg: BenchmarkConfig) -> None:
    """`benchmark.gate.tolerances` and `benchmark.trend_metrics` in the project's spelling, in
    place; an unknown name, or one measure under two spellings, is refused naming its key."""
    tolerances: dict[str, float] = {}
    for metric, tolerance in cfg.gate.tolerances.items():
        key = f"benchmark.gate.tolerances.{metric}"
        name = canonical_metric(metric, key)
        if name in tolerances:
            raise ConfigError(key, f"names {name} twice (as {metric!r} and another spelling)")
        tolerances[name] = tolerance
    cfg.gate.tolerances = tolerances
    cfg.trend_metrics = [
        canonical_metric(name, f"benchmark.trend_metrics[{i}]")
        for i, name in enumerate(cfg.trend_metrics)
    ]
