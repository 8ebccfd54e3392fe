"""The typed schema behind `conf/`: Hydra rejects wrong types and unknown keys with it, and
`validate` rejects keys Hydra let through (`+key=...`) and out-of-range values, each error naming
its key."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

from hydra.core.config_store import ConfigStore

from retrieval_bench.benchmark.config import BenchmarkConfig
from retrieval_bench.compare.config import CompareConfig
from retrieval_bench.encoders.config import EncoderConfig
from retrieval_bench.errors import ConfigError, nearest_hint
from retrieval_bench.filters import FilterConfig
from retrieval_bench.retrievers.bm25_config import BM25_IMPLS, BM25Config
from retrieval_bench.retrievers.dense_config import DenseIndexConfig
from retrieval_bench.retrievers.fusion import check_fusion, check_strategy_weights
from retrieval_bench.retrievers.m3_config import M3Config
from retrieval_bench.retrievers.run_file_config import SPEC as RUN_FILE_SPEC
from retrieval_bench.retrievers.run_file_config import RunFileConfig
from retrieval_bench.retrievers.service_config import ServiceConfig
from retrieval_bench.router_config import RouterConfig, load_rule_set
from retrieval_bench.scoring.groups import check_field
from retrieval_bench.scoring.refusal import RefusalConfig
from retrieval_bench.scoring.units import DOC, UNITS
from retrieval_bench.stages.config import ContextConfig, RerankerConfig
from retrieval_bench.text import TextConfig

# The arms every job can name in `retriever.arms` without a config file of its own: name -> the
# ArmSpec class (retrieval_bench.components) Hydra instantiates. A config adds more under
# `arms.<name>` (a class anywhere on the path, plus its keyword arguments): no list to edit.
BUILTIN_ARMS: dict[str, dict[str, Any]] = {
    "bm25": {"_target_": "retrieval_bench.retrievers.bm25.BM25ArmSpec"},
    "dense": {"_target_": "retrieval_bench.retrievers.dense.DenseArmSpec"},
    "run_file": {"_target_": RUN_FILE_SPEC},
    # BGE-M3's three outputs of one encode, and their weighted sum (the `m3:` node).
    "m3_dense": {"_target_": "retrieval_bench.retrievers.m3.M3Spec", "mode": "dense"},
    "m3_sparse": {"_target_": "retrieval_bench.retrievers.m3.M3Spec", "mode": "sparse"},
    "m3_colbert": {"_target_": "retrieval_bench.retrievers.m3.M3Spec", "mode": "colbert"},
    "m3": {"_target_": "retrieval_bench.retrievers.m3.M3Spec", "mode": "all"},
    "service": {"_target_": "retrieval_bench.retrievers.service.ServiceArmSpec"},
}
DATASET_FORMATS = ("native", "beir")


@dataclass
class DatasetConfig:
    name: str = "travel"
    format: str = "native"
    # native: a folder holding passages.jsonl (and lexicon.jsonl), and an evaluation set file
    corpus: str = "corpus/travel"
    evalset: str = "evalsets/travel.jsonl"
    # beir: a folder holding corpus.jsonl, queries.jsonl and qrels/<split>.tsv
    path: str = ""
    split: str = "test"


@dataclass
class RetrieverConfig:
    name: str = "hybrid"
    arms: list[str] = field(default_factory=lambda: ["bm25", "dense"])
    # How the arms' pools become one ranking (retrieval_bench.retrievers.fusion): rrf, score or
    # fill. rrf_k is RRF's k (and fill's); normalize and method are score fusion's.
    combine: str = "rrf"
    pool_size: int = 10
    rrf_k: int = 60
    normalize: str = "minmax"  # none, minmax, zscore
    method: str = "combsum"  # combsum, combmnz
    # One weight per arm of `arms`, in its order (rrf and score); empty: all 1.
    weights: list[float] = field(default_factory=list)


@dataclass
class ScoringConfig:
    # Cut-offs scored besides top_k.
    cutoffs: list[int] = field(default_factory=list)
    # Fields to break every metric down by: meta.<field> (of the relevant passages), a query
    # field (user_role, ...) or query_length (see retrieval_bench.scoring.groups).
    group_by: list[str] = field(default_factory=list)
    # What one ranked item is: "passage", or "doc" (rankings and labels read by document:
    # retrieval_bench.scoring.units).
    unit: str = "passage"
    # Modules to import before anything is scored or validated: each registers its own
    # measures (scoring.registry.register_measure), e.g. plugins=[my_metrics].
    plugins: list[str] = field(default_factory=list)


@dataclass
class RunConfig:
    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    retriever: RetrieverConfig = field(default_factory=RetrieverConfig)
    encoder: EncoderConfig = field(default_factory=EncoderConfig)
    router: RouterConfig = field(default_factory=RouterConfig)
    bm25: BM25Config = field(default_factory=BM25Config)
    # Dense index: FAISS factory string (Flat = exact) and its search settings.
    dense: DenseIndexConfig = field(default_factory=DenseIndexConfig)
    # A TREC run from another system as an arm (retriever=run_file run_file.path=RUN).
    run_file: RunFileConfig = field(default_factory=RunFileConfig)
    # BGE-M3's dense, sparse and ColBERT arms (m3_dense, m3_sparse, m3_colbert) and `m3`.
    m3: M3Config = field(default_factory=M3Config)
    # An external retriever over HTTP (retriever=service service.url=URL).
    service: ServiceConfig = field(default_factory=ServiceConfig)
    text: TextConfig = field(default_factory=TextConfig)
    filters: FilterConfig = field(default_factory=FilterConfig)
    scoring: ScoringConfig = field(default_factory=ScoringConfig)
    # Stages after fusion (retrieval_bench.stages): rerank before the top_k cut, context after.
    reranker: RerankerConfig = field(default_factory=RerankerConfig)
    context: ContextConfig = field(default_factory=ContextConfig)
    # Which stage's top score the refusal evaluation thresholds (retrieval_bench.scoring.refusal).
    refusal: RefusalConfig = field(default_factory=RefusalConfig)
    top_k: int = 6
    # Embedding cache shared by every job (relative paths resolve against the project root).
    cache_dir: str = "outputs/cache"
    # Arm name -> its spec: `_target_` (an ArmSpec class) and the spec's keyword arguments.
    arms: dict[str, Any] = field(
        default_factory=lambda: {name: dict(node) for name, node in BUILTIN_ARMS.items()}
    )
    # How a multirun's jobs are compared when it ends (retrieval_bench.compare).
    compare: CompareConfig = field(default_factory=CompareConfig)
    # The monthly benchmark job (python -m run experiment=monthly).
    benchmark: BenchmarkConfig = field(default_factory=BenchmarkConfig)


def register_configs() -> None:
    ConfigStore.instance().store(name="base_config", node=RunConfig)


def _positive(key: str, value: int) -> None:
    if value < 1:
        raise ConfigError(key, f"must be a positive integer, got {value}")


def _one_of(key: str, value: str, options: tuple[str, ...]) -> None:
    if value not in options:
        raise ConfigError(key, f"'{value}' is not one of: {', '.join(options)}")


def check_known_keys(node: object, prefix: str = "") -> None:
    """Every key of a typed node must be a field of its schema; the first that is not raises
    ConfigError naming it and its nearest known name.

    Hydra's struct mode refuses `retriever.poolsize=5`, but an append (`+retriever.poolsize=5`,
    Hydra's own hint for that error) or a force-add (`++`) opens the node and adds the key, and
    `OmegaConf.to_object` then sets it as a stray attribute of the dataclass, where nothing
    reads it. This walks the built objects (dataclasses, and the dicts and lists holding them)
    and refuses such attributes."""
    if is_dataclass(node) and not isinstance(node, type):
        known = [f.name for f in fields(node)]
        for key in vars(node):
            if key not in known:
                raise ConfigError(
                    f"{prefix}{key}", f"unknown key; {nearest_hint(key, known, prefix)}"
                )
        for name in known:
            check_known_keys(getattr(node, name), f"{prefix}{name}.")
    elif isinstance(node, Mapping):
        for key, value in node.items():
            check_known_keys(value, f"{prefix}{key}.")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            check_known_keys(value, f"{prefix[:-1]}[{i}].")


def nearest_key(key: str) -> str | None:
    """The known dotted key nearest to an unknown one (`retriever.poolsize` ->
    `retriever.pool_size`), for messages about keys Hydra refused before any config existed;
    None when nothing is close or the key lies under a free-form mapping."""
    node: object = RunConfig()
    parts = key.split(".")
    for i, part in enumerate(parts):
        if not (is_dataclass(node) and not isinstance(node, type)):
            return None
        known = [f.name for f in fields(node)]
        if part not in known:
            nearest = difflib.get_close_matches(part, known, n=1)
            if not nearest:
                return None
            return ".".join([*parts[:i], nearest[0], *parts[i + 1 :]])
        node = getattr(node, part)
    return None


def check_corpus_size(cfg: RunConfig, passages: int, dataset: str) -> None:
    """Once the corpus is loaded: a `top_k` above its size would score every query @top_k on a
    shorter list."""
    if cfg.top_k > passages:
        raise ConfigError(
            "top_k",
            f"{cfg.top_k} is larger than the corpus of dataset '{dataset}' ({passages} passages)",
        )


def check_arm_specs(cfg: RunConfig) -> None:
    """Each `arms.<name>` node names a class by `_target_`; its other keys are that class's
    keyword arguments, checked when the spec is instantiated (`instantiate_arm`), so only the
    shape is checked here, without importing any implementation."""
    for name, node in cfg.arms.items():
        if not isinstance(node, Mapping) or not isinstance(node.get("_target_"), str):
            raise ConfigError(f"arms.{name}", "needs a `_target_`: the ArmSpec class to build")


def validate(cfg: RunConfig, given_arms: Sequence[str] = ()) -> None:
    """What Hydra's types cannot check; the first bad key or value raises ConfigError.
    `given_arms`: arm names a library caller passes as objects (not under `arms`)."""
    check_known_keys(cfg)
    # First: the measures plugins register are names compare and the gate may use.
    from retrieval_bench.scoring.registry import load_plugins

    load_plugins(cfg.scoring.plugins, "scoring.plugins")
    _positive("top_k", cfg.top_k)
    _positive("retriever.pool_size", cfg.retriever.pool_size)
    if cfg.retriever.pool_size < cfg.top_k:
        # Each arm returns at most pool_size passages: a shorter list would be scored @top_k
        # as if top_k had been retrieved.
        raise ConfigError(
            "retriever.pool_size",
            f"{cfg.retriever.pool_size} is smaller than top_k={cfg.top_k}: each arm would "
            f"return fewer passages than are scored; set retriever.pool_size>={cfg.top_k}",
        )
    if cfg.retriever.rrf_k < 0:
        raise ConfigError("retriever.rrf_k", f"must be >= 0, got {cfg.retriever.rrf_k}")
    if not cfg.retriever.arms:
        raise ConfigError("retriever.arms", "needs at least one arm")
    for i, arm in enumerate(cfg.retriever.arms):
        if arm not in cfg.arms and arm not in given_arms:
            raise ConfigError(
                f"retriever.arms[{i}]",
                f"unknown arm '{arm}'; {nearest_hint(arm, [*cfg.arms, *given_arms])} (a new "
                f"arm is an `arms.{arm}` node naming its class in _target_)",
            )
    if len(set(cfg.retriever.arms)) != len(cfg.retriever.arms):
        raise ConfigError("retriever.arms", f"an arm is listed twice: {list(cfg.retriever.arms)}")
    check_fusion(cfg.retriever)
    for i, cutoff in enumerate(cfg.scoring.cutoffs):
        _positive(f"scoring.cutoffs[{i}]", cutoff)
    if cfg.scoring.unit not in UNITS:
        raise ConfigError(
            "scoring.unit",
            f"unknown unit {cfg.scoring.unit!r}; {nearest_hint(cfg.scoring.unit, UNITS)}",
        )
    for name in cfg.scoring.group_by:
        check_field(name)
        if cfg.scoring.unit == DOC and name.startswith("meta."):
            # meta.<field> reads the relevant passages; document labels name no passage.
            raise ConfigError(
                "scoring.group_by",
                f"{name!r} groups by the relevant passages' metadata, which scoring.unit=doc "
                "does not have; group by a query field instead",
            )
    cfg.refusal.validate()
    cfg.reranker.validate(cfg.retriever.pool_size, cfg.top_k)
    cfg.context.validate()
    _one_of("dataset.format", cfg.dataset.format, DATASET_FORMATS)
    if cfg.dataset.format == "beir" and not cfg.dataset.path:
        raise ConfigError("dataset.path", "a BEIR dataset needs dataset.path=DIR")
    _one_of("bm25.impl", cfg.bm25.impl, BM25_IMPLS)
    if cfg.bm25.k1 < 0:
        raise ConfigError("bm25.k1", f"must be >= 0, got {cfg.bm25.k1}")
    if not 0 <= cfg.bm25.b <= 1:
        raise ConfigError("bm25.b", f"must be within [0, 1], got {cfg.bm25.b}")
    cfg.text.validate()
    cfg.encoder.validate()
    cfg.dense.validate()
    cfg.run_file.validate([cfg.arms.get(arm) for arm in cfg.retriever.arms])
    cfg.m3.validate()
    cfg.service.validate()
    cfg.compare.validate()
    cfg.benchmark.validate()
    check_arm_specs(cfg)
    # router=rules: its rules, routes, strategies and cues
    rule_set = load_rule_set(cfg.router, (*cfg.arms, *given_arms))
    if rule_set is not None:
        check_strategy_weights(
            cfg.retriever,
            {
                r.strategy.name: (r.strategy.combine, r.strategy.arms)
                for r in rule_set.routes.values()
            },
        )
