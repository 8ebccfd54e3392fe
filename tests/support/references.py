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


def scipy_stats_power(delta: float, sd: float, n: int, alpha_test: float) -> float:
    """`stats.power.t_test_power` through scipy.stats's public API (`t.ppf`, `nct.sf`,
    `nct.cdf`, each with its argument handling), as the project computed it before it called
    the distributions' `_ppf`, `_sf` and `_cdf` directly; NaN tails handled as there."""
    import math

    from scipy import stats

    df = n - 1
    critical = stats.t.ppf(1.0 - alpha_test / 2.0, df)
    shift = delta * math.sqrt(n) / sd
    upper = float(stats.nct.sf(critical, df, shift))
    lower = float(stats.nct.cdf(-critical, df, shift))
    if math.isnan(upper):
        upper = 1.0 if shift > critical else 0.0
    return upper + (0.0 if math.isnan(lower) else lower)
