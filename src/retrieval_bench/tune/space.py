"""The search space: job keys with Hydra sweeps over their values, as Optuna distributions.

A dimension is written as Hydra writes a sweep (Hydra's own override grammar parses it, as its
Optuna sweeper does): `interval(a,b)` is a float range, `range(a,b[,step])` an integer (or
stepped float) range with `b` excluded as in Python, `choice(x,y,...)` (or `x,y,...`) a
categorical one, and `tag(log,...)` puts a range on a log scale. Each becomes one Optuna
parameter named after its key, except two keys that hold a weight vector:

* `retriever.weights`: one parameter per arm of `retriever.arms` (`retriever.weights[0]`, ...),
  each over the range given;
* `retriever.type_weights`: one per query type and arm (`retriever.type_weights.<type>[i]`); the
  vector a type gets is its raw one shrunk toward the global weights
  (`shrink_type_weights`).

A trial's values are written back as override strings (`combiners.rrf.k=37`) that Hydra parses
to the very values the trial ran (checked on every one), so `tune.json`'s `chosen` composes to
the configuration that was scored."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import optuna
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, Override, RangeSweep
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

from retrieval_bench.errors import ConfigError, nearest_hint

WEIGHTS = "retriever.weights"
TYPE_WEIGHTS = "retriever.type_weights"
# Keys that say what is measured, not how the system retrieves: never searched.
MEASURED = ("dataset", "scoring", "compare", "benchmark", "tune", "cache_dir", "hydra", "refusal")
# Plug-in nodes whose keys are their class's keyword arguments (checked when instantiated).
PLUGIN_GROUPS = ("arms", "combiners", "stages")
_ABSENT = object()


@dataclass(frozen=True)
class Param:
    """One Optuna parameter: its name in the study and its distribution."""

    name: str
    distribution: BaseDistribution


@dataclass(frozen=True)
class Dimension:
    """One searched job key, as written (`spec`), and the Optuna parameters behind it.
    `choices` maps a categorical parameter's stored string back to the value it stands for."""

    key: str
    spec: str
    params: tuple[Param, ...]
    choices: tuple[tuple[str, Any], ...] = ()

    def raw(self, values: Mapping[str, Any]) -> Any:
        """The key's value from the trial's parameter values (type weights before shrinkage:
        type -> raw vector)."""
        picked = [self._decode(values[p.name]) for p in self.params]
        if self.key == WEIGHTS:
            return [float(v) for v in picked]
        if self.key == TYPE_WEIGHTS:
            out: dict[str, list[float]] = {}
            for param, value in zip(self.params, picked, strict=True):
                qtype = param.name[len(TYPE_WEIGHTS) + 1 :].rpartition("[")[0]
                out.setdefault(qtype, []).append(float(value))
            return out
        return picked[0]

    def _decode(self, value: Any) -> Any:
        return dict(self.choices).get(value, value) if self.choices else value


@dataclass(frozen=True)
class SearchSpace:
    dimensions: tuple[Dimension, ...]

    @property
    def keys(self) -> list[str]:
        return [d.key for d in self.dimensions]

    def suggest(self, trial: optuna.Trial) -> dict[str, Any]:
        """The trial's parameter values, each drawn by the study's sampler."""
        return {
            p.name: suggest(trial, p.name, p.distribution)
            for d in self.dimensions
            for p in d.params
        }

    def describe(self) -> dict[str, str]:
        return {d.key: d.spec for d in self.dimensions}


def suggest(trial: optuna.Trial, name: str, distribution: BaseDistribution) -> Any:
    """Optuna's public suggest_* call for a distribution object."""
    if isinstance(distribution, FloatDistribution):
        return trial.suggest_float(
            name, distribution.low, distribution.high, step=distribution.step,
            log=distribution.log,
        )  # fmt: skip
    if isinstance(distribution, IntDistribution):
        return trial.suggest_int(
            name, distribution.low, distribution.high, step=distribution.step,
            log=distribution.log,
        )  # fmt: skip
    if isinstance(distribution, CategoricalDistribution):
        return trial.suggest_categorical(name, distribution.choices)
    raise TypeError(f"unsupported distribution {distribution!r}")


def parse_sweep(key: str, spec: str) -> Override:
    """`spec` parsed by Hydra's override grammar as the value of `key`; ConfigError naming
    `tune.space.<key>` when it is not a sweep."""
    where = f"tune.space.{key}"
    try:
        override = OverridesParser.create().parse_override(f"{key}={spec}")
    except HydraException as exc:
        raise ConfigError(where, f"cannot parse {spec!r}: {exc}") from exc
    if not override.is_sweep_override():
        raise ConfigError(
            where,
            f"{spec!r} is one value, not a search range: write interval(a,b), range(a,b[,step]) "
            "or choice(x,y,...) (a fixed value is a plain override of the job)",
        )
    return override


def distribution(key: str, spec: str) -> tuple[BaseDistribution, tuple[tuple[str, Any], ...]]:
    """The Optuna distribution of one sweep (and, for a categorical one, its stored string ->
    value map); ConfigError naming the key for an empty or unsupported range."""
    where = f"tune.space.{key}"
    sweep = parse_sweep(key, spec).value()
    log = "log" in getattr(sweep, "tags", set())
    if isinstance(sweep, IntervalSweep):
        low, high = float(sweep.start), float(sweep.end)  # type: ignore[arg-type]
        if not low < high:
            raise ConfigError(where, f"{spec!r} is an empty range: interval(a,b) needs a < b")
        _check_log(where, spec, log, low)
        return FloatDistribution(low, high, log=log), ()
    if isinstance(sweep, RangeSweep):
        start, stop = sweep.start, sweep.stop
        step = sweep.step if sweep.step is not None else 1
        if start is None or stop is None or not step or (stop - start) / step <= 0:
            raise ConfigError(where, f"{spec!r} is an empty range: it holds no value")
        count = math.ceil((stop - start) / step - 1e-9)
        values = sorted([start + i * step for i in range(count)])
        if len(values) < 2:
            raise ConfigError(where, f"{spec!r} holds one value: set it as a plain override")
        _check_log(where, spec, log, values[0])
        if all(isinstance(v, int) for v in (start, stop, step)):
            low, high = int(values[0]), int(values[-1])
            return IntDistribution(low, high, step=1 if log else abs(int(step)), log=log), ()
        if log:
            raise ConfigError(where, "tag(log, range(...)) needs integer bounds and step 1")
        return FloatDistribution(values[0], values[-1], step=abs(step)), ()
    if isinstance(sweep, ChoiceSweep):
        options = list(sweep.list)
        if len(options) < 2:
            raise ConfigError(where, f"{spec!r} offers {len(options)} value(s): give two or more")
        if log:
            raise ConfigError(where, "tag(log, ...) applies to ranges, not choices")
        scalars = [v for v in options if v is None or isinstance(v, (bool, int, float, str))]
        if len(scalars) == len(options):
            return CategoricalDistribution(scalars), ()
        labels = [hydra_value(v) for v in options]
        return CategoricalDistribution(labels), tuple(zip(labels, options, strict=True))
    raise ConfigError(where, f"{spec!r}: unsupported sweep {type(sweep).__name__}")


def _check_log(where: str, spec: str, log: bool, low: float) -> None:
    if log and low <= 0:
        raise ConfigError(where, f"{spec!r}: a log scale needs a range above 0")


def check_key(key: str, base: DictConfig) -> None:
    """`key` is a setting of the composed job that a search may vary; ConfigError naming
    `tune.space.<key>` otherwise (an unknown key gets the nearest known one)."""
    where = f"tune.space.{key}"
    root = key.split(".")[0]
    if root in MEASURED:
        raise ConfigError(
            where, f"'{root}' says what is measured or where, not how the system retrieves: "
            "it cannot be searched",
        )  # fmt: skip
    if key == "top_k":
        raise ConfigError(
            where,
            "top_k is the depth every metric is read at, not a setting to tune (a deeper cut "
            "always finds more): tune at a fixed top_k",
        )
    if key_of(base, key):
        return
    parts = key.split(".")
    if len(parts) >= 3 and parts[0] in PLUGIN_GROUPS and parts[1] in base[parts[0]]:
        return  # a keyword argument of a plug-in node: checked when the spec is built
    known = flat_keys(base)
    raise ConfigError(where, f"unknown key '{key}'; {nearest_hint(key, known)}")


def key_of(base: DictConfig, key: str) -> bool:
    """Whether the composed job has `key` (a value may be null)."""
    return OmegaConf.select(base, key, default=_ABSENT) is not _ABSENT


def flat_keys(node: Any, prefix: str = "") -> list[str]:
    """Every dotted key of a config, for did-you-mean hints."""
    out: list[str] = []
    if isinstance(node, DictConfig):
        for name in node:
            child = node._get_node(name)
            key = f"{prefix}{name!s}"
            out.append(key)
            if isinstance(child, DictConfig):
                out.extend(flat_keys(child, key + "."))
    return out


def build_space(
    specs: Mapping[str, str],
    base: DictConfig,
    arms: Sequence[str],
    types: Sequence[str],
) -> SearchSpace:
    """The dimensions of `specs` (key -> sweep), each key checked against the composed job
    `base`; `arms` are the arms the weights are for, `types` the query types (or routes)
    `retriever.type_weights` gets a vector for."""
    if not specs:
        raise ConfigError(
            "tune.space",
            "is empty: name at least one key to search, e.g. 'combiners.rrf.k=range(10,101)' "
            "on the command line or tune.space in an experiment preset",
        )
    dimensions = []
    for key, spec in specs.items():
        check_key(key, base)
        dist, choices = distribution(key, spec)
        if key == WEIGHTS:
            names = [f"{WEIGHTS}[{i}]" for i in range(len(arms))]
        elif key == TYPE_WEIGHTS:
            if not types:
                raise ConfigError(f"tune.space.{key}", "no query type to give a vector to")
            names = [f"{TYPE_WEIGHTS}.{t}[{i}]" for t in types for i in range(len(arms))]
        else:
            names = [key]
        params = tuple(Param(name, dist) for name in names)
        dimensions.append(Dimension(key, spec, params, choices))
    if "retriever.arms" in specs and ({WEIGHTS, TYPE_WEIGHTS} & set(specs)):
        raise ConfigError(
            "tune.space.retriever.arms",
            "cannot be searched with the weights: a weight vector has one weight per arm",
        )
    return SearchSpace(tuple(dimensions))


def shrink_type_weights(
    raw: Mapping[str, Sequence[float]],
    global_weights: Sequence[float],
    counts: Mapping[str, int],
    strength: float,
) -> dict[str, list[float]]:
    """Each type's vector shrunk toward the global one by `strength` pseudo-queries:
    w = (n raw + s global) / (n + s), n the type's training queries. A type without training
    queries gets the global vector; with s = 0 the raw vectors stand."""
    out = {}
    for qtype, vector in raw.items():
        n = counts.get(qtype, 0)
        if n + strength == 0:
            out[qtype] = [float(g) for g in global_weights]
            continue
        out[qtype] = [
            (n * float(w) + strength * float(g)) / (n + strength)
            for w, g in zip(vector, global_weights, strict=True)
        ]
    return out


def hydra_value(value: Any) -> str:
    """`value` in Hydra's override grammar (lists and dicts nested), parsed back to itself."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"no override spelling for {value}")
        return repr(value)
    if isinstance(value, str):
        if _PLAIN.fullmatch(value) and _parses_to(value, value):
            return value
        escaped = value.replace("\\", "\\\\").replace("'", "\\'")
        return f"'{escaped}'"
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{k}:{hydra_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    raise TypeError(f"no override spelling for {type(value).__name__}")


_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")


@functools.cache
def _parser() -> OverridesParser:
    return OverridesParser.create()


def _parses_to(text: str, value: Any) -> bool:
    try:
        return bool(_parser().parse_override(f"k={text}").value() == value)
    except HydraException:
        return False


def override_string(key: str, value: Any) -> str:
    """`key=value` as an override Hydra parses to exactly `value` (checked)."""
    text = f"{key}={hydra_value(value)}"
    parsed = _parser().parse_override(text).value()
    if parsed != value:
        raise ValueError(f"override {text!r} parses to {parsed!r}, not {value!r}")
    return text
