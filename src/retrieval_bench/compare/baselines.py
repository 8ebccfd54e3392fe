"""Which job of a sweep each ablation baseline (`compare.baselines`) names, or why none does.

A baseline is a setting of the keys the sweep varies (`top_k=6`, `retriever=bm25`), or a bare
value (`bm25`) that one varying key takes. A baseline the sweep cannot hold is bad config
(exit 2, naming the key): refused before the sweep's first job when the sweep's own overrides
already say so (`check_sweep`), else when the comparison reads the finished jobs
(`resolve_baseline`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from retrieval_bench.config.compare import ANY_KEY
from retrieval_bench.errors import ConfigError
from retrieval_bench.jobdir.read import FinishedJob, canonical


def _bare_key(value: str, values_of: Mapping[str, Sequence[str]], baseline_key: str) -> str:
    """The one key whose values include `value`; refused naming `baseline_key` otherwise."""
    having = [k for k, values in values_of.items() if value in values]
    if len(having) == 1:
        return having[0]
    if having:
        why = f"several varying keys take it ({', '.join(having)}): name one as KEY={value}"
    else:
        shown = "; ".join(f"{k}: {', '.join(v)}" for k, v in values_of.items()) or "nothing"
        why = f"no varying key takes it (varying: {shown})"
    raise ConfigError(baseline_key, f"{value!r} is not in the sweep: {why}")


def resolve_baseline(
    baseline: Mapping[str, Any],
    jobs: Sequence[FinishedJob],
    keys: Sequence[str],
    baseline_key: str,
) -> dict[str, str]:
    """A baseline as varying key -> canonical value, checked against the finished `jobs`
    (whose varying `keys` are assigned): a key that does not vary, a bare value no varying key
    takes, or a setting no job has is refused naming `baseline_key`. Empty: no baseline."""
    spec = {str(k): canonical(v) for k, v in baseline.items()}
    if ANY_KEY in spec:
        values_of = {k: sorted({j.setting.get(k, "") for j in jobs}) for k in keys}
        value = spec.pop(ANY_KEY)
        spec = {_bare_key(value, values_of, baseline_key): value, **spec}
    if not spec:
        return spec
    named = ",".join(f"{k}={v}" for k, v in spec.items())
    unknown = [k for k in spec if k not in keys]
    if unknown:
        raise ConfigError(
            baseline_key,
            f"{named}: key(s) {', '.join(unknown)} do not vary between these jobs "
            f"(varying: {', '.join(keys) or 'nothing'})",
        )
    if not any(all(j.setting.get(k) == v for k, v in spec.items()) for j in jobs):
        raise ConfigError(
            baseline_key,
            f"{named} is not in the sweep: no job has that setting "
            f"(jobs: {'; '.join(j.label for j in jobs)})",
        )
    return spec


def check_sweep(
    baselines: Sequence[Mapping[str, Any]],
    swept: Mapping[str, Sequence[str]],
    baseline_key: str,
    complete: bool = True,
) -> None:
    """Refuse, before any job runs, a baseline the sweep's overrides cannot produce: a value
    a swept key does not take, a bare value no swept key takes, or (when `swept` lists every
    swept key's values: `complete`) a key the sweep does not vary. `swept`: each swept key's
    values as the command line spells them."""
    values_of = {k: [canonical(v) for v in values] for k, values in swept.items()}
    for baseline in baselines:
        spec = {str(k): canonical(v) for k, v in baseline.items()}
        if ANY_KEY in spec:
            value = spec.pop(ANY_KEY)
            if not complete and not any(value in v for v in values_of.values()):
                continue  # a glob sweep may take it: the finished jobs will tell
            spec[_bare_key(value, values_of, baseline_key)] = value
        for key, value in spec.items():
            if key in values_of and value not in values_of[key]:
                raise ConfigError(
                    baseline_key,
                    f"{key}={value} is not in the sweep ({key} takes {', '.join(values_of[key])})",
                )
            if key not in values_of and complete:
                raise ConfigError(
                    baseline_key,
                    f"{key}={value} is not in the sweep: {key} does not vary "
                    f"(swept: {', '.join(values_of) or 'nothing'})",
                )
