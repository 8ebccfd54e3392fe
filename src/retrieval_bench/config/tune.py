"""The `tune:` node: how `python -m run.tune` searches a job's settings and estimates, on
queries the search never saw, how much of the tuned gain holds (retrieval_bench.tune).

Only the schema and the checks that need no dataset live here; the search space's keys are
checked against the composed job (tune.space), the fold count against the evaluation set's
smallest query type (tune.folds)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from retrieval_bench.errors import ConfigError

# Optuna samplers by name (tune.sampler): TPE (Bergstra et al.), uniform random, and scrambled
# Sobol quasi-random points. Each study's is seeded with its own seed derived from `tune.seed`
# (retrieval_bench.tune.study.sampler_seed).
SAMPLERS = ("tpe", "random", "qmc")


@dataclass
class TuneConfig:
    space: dict[str, str] = field(default_factory=dict)
    """The search space: job key -> a Hydra sweep over its values, `interval(0,1)` (floats),
    `range(10,101,10)` (ints, the end excluded as in Python), `choice(minmax,zscore)`,
    `tag(log,interval(1,100))` (log scale). `retriever.weights` and `retriever.type_weights` take
    one range, searched for each arm (and each query type). On the command line a sweep override
    of a job key (`'combiners.rrf.k=range(10,101)'`) is a dimension too."""
    trials: int = 50
    """Trials of each search: one on all queries, one per fold on the other folds."""
    folds: int = 5
    """K: the scored queries are split into K folds stratified by query type (seeded)."""
    seed: int = 0
    """Seeds the folds and every study's sampler (a distinct seed per study, derived from it)."""
    metric: str = "ndcg@K"
    """What the search maximises (or minimises, for a lower-is-better measure): a doc measure
    with a per-query value, `<name>@K` (K: top_k) or `<name>@<cut-off the job scores>`."""
    stage: str = "final"
    """The recorded stage the metric reads."""
    sampler: str = field(default="tpe", metadata={"choices": SAMPLERS})
    """Optuna's sampler: `tpe` (Bergstra et al.), `random` (uniform) or `qmc` (scrambled Sobol)."""
    baseline: Any = None
    """The configuration in use now, as searched key -> value (`{combiners.rrf.k: 60}`, or
    "combiners.rrf.k=60"); a searched key it leaves out keeps the job's value. Compared with the
    tuned configurations on held-out queries only."""
    shrinkage: float = 10.0
    """With `retriever.type_weights` searched: how strongly each type's vector is shrunk toward
    the global one, in queries: w_type = (n w_raw + s w_global) / (n + s), n the type's training
    queries (0: no shrinkage)."""
    dir: str = ""
    """The tuning folder (tune.json, tuned.yaml, the Optuna study); rerun with the same folder to
    resume. Empty: a new folder under outputs/tune/."""

    def validate(self) -> None:
        """The first bad value raises ConfigError naming its key."""
        if isinstance(self.trials, bool) or self.trials < 1:
            raise ConfigError("tune.trials", f"must be a positive integer, got {self.trials!r}")
        if isinstance(self.folds, bool) or self.folds < 2:
            raise ConfigError(
                "tune.folds",
                f"must be at least 2 (a fold is held out while the others tune), got "
                f"{self.folds!r}",
            )
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ConfigError("tune.seed", f"must be a non-negative integer, got {self.seed!r}")
        if self.sampler not in SAMPLERS:
            raise ConfigError(
                "tune.sampler", f"{self.sampler!r} is not one of: {', '.join(SAMPLERS)}"
            )
        if not self.shrinkage >= 0:
            raise ConfigError("tune.shrinkage", f"must be >= 0 (queries), got {self.shrinkage}")
        for key, spec in self.space.items():
            if not isinstance(spec, str) or not spec.strip():
                raise ConfigError(
                    f"tune.space.{key}",
                    f"must be a sweep such as interval(0,1) or range(10,101), got {spec!r}",
                )
