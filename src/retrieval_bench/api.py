"""The library entry: compose a config as the app would, and run a job from Python.

`python -m run` is this plus Hydra's command line, folders and launchers; a notebook uses it
directly, with its own dataset and arms, and gets the records and metrics back."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from retrieval_bench.config import RunConfig
from retrieval_bench.config.compose import CONF_DIR, compose_dict, typed_config
from retrieval_bench.job.check import check_config
from retrieval_bench.job.result import JobResult
from retrieval_bench.job.runner import run_job
from retrieval_bench.protocols import Arm, ArmSpec, Combiner, CombinerSpec, StageSpec
from retrieval_bench.records import Dataset

__all__ = ["CONF_DIR", "compose", "evaluate"]


def compose(overrides: Sequence[str] = (), config_dir: str | Path | None = None) -> RunConfig:
    """The typed config `python -m run <overrides>` would run (the shipped `conf/`, or
    `config_dir`), validated: a bad key raises ConfigError naming it. Arms from a user config
    folder are reached with `hydra.searchpath=[file://DIR]` among the overrides."""
    cfg = typed_config(compose_dict(overrides, config_dir))
    check_config(cfg)
    return cfg


def evaluate(
    cfg: RunConfig | None = None,
    *,
    dataset: Dataset | None = None,
    arms: Mapping[str, Arm | ArmSpec] | None = None,
    stages: Mapping[str, StageSpec] | None = None,
    combiners: Mapping[str, Combiner | CombinerSpec] | None = None,
) -> JobResult:
    """Run one job and return its records and metrics (nothing is written; `write_job` writes
    the job folder). `dataset` replaces the configured one; `arms` are your own arms by name
    (Arm objects, or ArmSpecs built against the corpus): when given, `retriever.arms` is set
    to them in order when it names only configured arms; else it is kept (`[bm25, mine]` fuses
    yours with a configured one) and a name that is neither is refused with the nearest.
    `stages` are your own StageSpecs by name, run beside the configured stages where their
    `placement` (or an `after` attribute naming a stage) puts them; `combiners` your own
    combiners by name (a Combiner, or a CombinerSpec built with the job's weights), used when
    `retriever.combine` (or a router strategy) names one; a name that is also a node's is
    yours. Each is checked at its boundary as a configured plug-in is."""
    cfg = cfg if cfg is not None else compose()
    if arms and all(name in cfg.arms and name not in arms for name in cfg.retriever.arms):
        cfg.retriever.arms = list(arms)
    check_config(cfg, tuple(arms or ()), stages, tuple(combiners or ()))
    return run_job(cfg, dataset, arms, stages, combiners)
