"""The robustness metric's name, declared once (`scoring.robustness` computes it): what
`compare.metrics`, `run.compare --metric`, the gate's tolerances and the trend may name.
Imports nothing, so config validation reads it cheaply.

`stable@K` is one value per perturbed variant (1 when its hit@K equals its original's, else 0),
stored in metrics.json `robustness.per_query` and averaged per query type over every kind; it
is higher-is-better, so the gate's "drop beyond tolerance" applies unchanged.
"""

from __future__ import annotations

STABLE = "stable"


def stable_name(k: int) -> str:
    return f"{STABLE}@{k}"


def is_robustness_metric(spec: str) -> bool:
    """A name read from metrics.json's `robustness` section instead of a stage's."""
    return str(spec).partition("@")[0] == STABLE
