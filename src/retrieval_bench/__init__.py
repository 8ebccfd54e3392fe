"""Compare retrievers on labelled evaluation sets, per query type, stage by stage.

The library API (the Hydra app `python -m run` is a thin layer over it)::

    from retrieval_bench import compose, evaluate
    result = evaluate(compose(["retriever=bm25"]))          # the shipped travel set
    result.metrics["stages"]["final"]["overall"]["ndcg@6"]
    result.to_dataframe()                                    # pandas, long format

`evaluate(cfg, dataset=..., arms={...})` runs a job on your own `Dataset` (of `Passage` and
`EvalQuery` records) with your own arms: any object with `search(queries, k, allowed) ->
list[Ranked]` and `info()` (the `Arm` protocol), or an `ArmSpec` whose `build(name, ctx)` makes
one from the corpus (`BuildContext`). `score(qrels, run, ["ndcg@10"])` scores any run (TREC
files or dicts) as `python -m run.score` does. The plug-in protocols (`ArmSpec`,
`CombinerSpec`, `StageSpec` with its placement `BEFORE_CUT` / `CUT` / `AFTER_CUT`, `Encoder`
built from an `EncoderConfig`) are what a team's own module implements (ARCHITECTURE.md). Names
are loaded on first use, so importing the package (or its config schema) loads no retriever,
model or index library.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# name -> the module that defines it
_EXPORTS = {
    "compose": "retrieval_bench.api",
    "evaluate": "retrieval_bench.api",
    "JobResult": "retrieval_bench.job.result",
    "write_job": "retrieval_bench.jobdir.write",
    "to_dataframe": "retrieval_bench.scoring.table",
    "RunConfig": "retrieval_bench.config",
    "Dataset": "retrieval_bench.records",
    "Passage": "retrieval_bench.records",
    "EvalQuery": "retrieval_bench.records",
    "Arm": "retrieval_bench.protocols",
    "ArmSpec": "retrieval_bench.protocols",
    "BuildContext": "retrieval_bench.protocols",
    "Ranked": "retrieval_bench.records",
    "TieBreak": "retrieval_bench.tiebreak",
    "Combiner": "retrieval_bench.protocols",
    "CombinerSpec": "retrieval_bench.protocols",
    "Stage": "retrieval_bench.protocols",
    "StageSpec": "retrieval_bench.protocols",
    "Encoder": "retrieval_bench.protocols",
    "BEFORE_CUT": "retrieval_bench.protocols",
    "CUT": "retrieval_bench.protocols",
    "AFTER_CUT": "retrieval_bench.protocols",
    "EncoderConfig": "retrieval_bench.config.encoder",
    "score": "retrieval_bench.scoring.run_scores",
    "RunScores": "retrieval_bench.scoring.run_scores",
}
__all__ = [
    "AFTER_CUT",
    "BEFORE_CUT",
    "CUT",
    "Arm",
    "ArmSpec",
    "BuildContext",
    "Combiner",
    "CombinerSpec",
    "Dataset",
    "Encoder",
    "EncoderConfig",
    "EvalQuery",
    "JobResult",
    "Passage",
    "Ranked",
    "RunConfig",
    "RunScores",
    "Stage",
    "StageSpec",
    "TieBreak",
    "compose",
    "evaluate",
    "score",
    "to_dataframe",
    "write_job",
]

if TYPE_CHECKING:
    from retrieval_bench.api import compose, evaluate
    from retrieval_bench.config import RunConfig
    from retrieval_bench.config.encoder import EncoderConfig
    from retrieval_bench.job.result import JobResult
    from retrieval_bench.jobdir.write import write_job
    from retrieval_bench.protocols import (
        AFTER_CUT,
        BEFORE_CUT,
        CUT,
        Arm,
        ArmSpec,
        BuildContext,
        Combiner,
        CombinerSpec,
        Encoder,
        Stage,
        StageSpec,
    )
    from retrieval_bench.records import Dataset, EvalQuery, Passage, Ranked
    from retrieval_bench.scoring.run_scores import RunScores, score
    from retrieval_bench.scoring.table import to_dataframe
    from retrieval_bench.tiebreak import TieBreak


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'retrieval_bench' has no attribute {name!r}")
    value = getattr(import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value
