"""The typed config of a job (`conf/` mirrors it) and its schema-level checks.

The schema imports no implementation: a plug-in's module imports its typed node from here, never
the other way round."""

from retrieval_bench.config.schema import (
    BUILTIN_ARMS,
    DatasetConfig,
    RetrieverConfig,
    RunConfig,
    ScoringConfig,
    register_configs,
)
from retrieval_bench.config.validate import (
    check_corpus_size,
    check_known_keys,
    nearest_key,
    validate,
)

__all__ = [
    "BUILTIN_ARMS",
    "DatasetConfig",
    "RetrieverConfig",
    "RunConfig",
    "ScoringConfig",
    "check_corpus_size",
    "check_known_keys",
    "nearest_key",
    "register_configs",
    "validate",
]
