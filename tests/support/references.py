"""Reference implementations the tests compare against, imported when first called.

Why: a test module's top-level imports run at collection, in every pytest-xdist worker, whether
or not its tests are selected; scikit-learn's import alone takes ~1.3 s of each worker's start.
"""

from __future__ import annotations

from typing import Any


def cohen_kappa_score(*args: Any, **kwargs: Any) -> float:
    """scikit-learn's `sklearn.metrics.cohen_kappa_score`, unchanged."""
    from sklearn.metrics import cohen_kappa_score as reference

    return float(reference(*args, **kwargs))
