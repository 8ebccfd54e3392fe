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


def scipy_stats_powers(delta: float, sd: float, n: int, criticals: Any) -> Any:
    """`stats.power._t_powers` (the t-test's power at each of several critical values)
    through scipy.stats's public `nct.sf` and `nct.cdf`, one value at a time, with its
    conventions: at |delta|, NaN tails as in `scipy_stats_power`, the far tail added only
    where it can reach 1e-9."""
    import math

    import numpy as np
    from scipy import stats

    df = n - 1
    shift = abs(delta) * math.sqrt(n) / sd
    out = []
    widest = float(stats.nct.cdf(-float(np.min(criticals)), df, shift))
    for critical in criticals:
        upper = float(stats.nct.sf(critical, df, shift))
        if math.isnan(upper):
            upper = 1.0 if shift > critical else 0.0
        if not (math.isnan(widest) or widest < 1e-9):
            lower = float(stats.nct.cdf(-critical, df, shift))
            upper += 0.0 if math.isnan(lower) else lower
        out.append(upper)
    return np.array(out)
