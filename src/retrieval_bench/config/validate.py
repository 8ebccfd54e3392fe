"""What the schema's types cannot say: keys Hydra let through (`+key=...`), out-of-range values and
combinations that cannot run, each refused as a ConfigError naming its key. Only the schema is
read here: checks that need an implementation (measure names, plug-in classes, router rules)
are `job.check`'s."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import fields, is_dataclass

from retrieval_bench.config.schema import (
    AFTER,
    DATASET_FORMATS,
    DOC,
    FIRST,
    SETTINGS,
    UNITS,
    RunConfig,
)
from retrieval_bench.config.typed import typed_keywords
from retrieval_bench.errors import ConfigError, nearest_hint


def _positive(key: str, value: int) -> None:
    if value < 1:
        raise ConfigError(key, f"must be a positive integer, got {value}")


def _one_of(key: str, value: str, options: tuple[str, ...]) -> None:
    if value not in options:
        raise ConfigError(key, f"'{value}' is not one of: {', '.join(options)}")


def check_known_keys(node: object, prefix: str = "") -> None:
    """Every key of a typed node must be a field of its schema; the first that is not raises
    ConfigError naming it and its nearest known name.

    Hydra's struct mode refuses `retriever.poolsize=5`, but an append (`+retriever.poolsize=5`,
    Hydra's own hint for that error) or a force-add (`++`) opens the node and adds the key, and
    `OmegaConf.to_object` then sets it as a stray attribute of the dataclass, where nothing
    reads it. This walks the built objects (dataclasses, and the dicts and lists holding them)
    and refuses such attributes."""
    if is_dataclass(node) and not isinstance(node, type):
        known = [f.name for f in fields(node)]
        for key in vars(node):
            if key not in known:
                raise ConfigError(
                    f"{prefix}{key}", f"unknown key; {nearest_hint(key, known, prefix)}"
                )
        for name in known:
            check_known_keys(getattr(node, name), f"{prefix}{name}.")
    elif isinstance(node, Mapping):
        for key, value in node.items():
            check_known_keys(value, f"{prefix}{key}.")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            check_known_keys(value, f"{prefix[:-1]}[{i}].")


def nearest_key(key: str) -> str | None:
    """The known dotted key nearest to an unknown one (`retriever.poolsize` ->
    `retriever.pool_size`), for messages about keys Hydra refused before any config existed;
    None when nothing is close or the key lies under a free-form mapping."""
    node: object = RunConfig()
    parts = key.split(".")
    for i, part in enumerate(parts):
        if isinstance(node, Mapping) and parts[0] in ("arms", "combiners", "stages"):
            if i == 1 and part not in node:
                return None  # a plug-in's name is the user's to choose: nothing to suggest
            known = [str(k) for k in node]  # the plug-ins, or one node's keyword arguments
        elif is_dataclass(node) and not isinstance(node, type):
            known = [f.name for f in fields(node)]
        else:
            return None
        if part not in known:
            nearest = difflib.get_close_matches(part, known, n=1)
            if not nearest:
                return None
            return ".".join([*parts[:i], nearest[0], *parts[i + 1 :]])
        node = node[part] if isinstance(node, Mapping) else getattr(node, part)
    return None


def check_corpus_size(cfg: RunConfig, passages: int, dataset: str) -> None:
    """Once the corpus is loaded: a `top_k` above its size would score every query @top_k on a
    shorter list."""
    if cfg.top_k > passages:
        raise ConfigError(
            "top_k",
            f"{cfg.top_k} is larger than the corpus of dataset '{dataset}' ({passages} passages)",
        )


def check_plugin_nodes(cfg: RunConfig) -> None:
    """Each `arms.<name>`, `combiners.<name>` and `stages.<name>` node names a class by
    `_target_`; its other keys are that class's keyword arguments (and, on a stage, `after`:
    `check_stages`). A node naming a shipped class is checked here against the class's
    settings dataclass (`schema.SETTINGS`: types, ranges), without importing the class,
    whether or not the job runs it; any other node is checked when its spec is instantiated
    (retrieval_bench.plugins)."""
    for group, nodes, kind in (
        ("arms", cfg.arms, "ArmSpec"),
        ("combiners", cfg.combiners, "CombinerSpec"),
        ("stages", cfg.stages, "StageSpec"),
    ):
        for name, node in nodes.items():
            if group == "stages" and isinstance(node, Mapping) and set(node) == {AFTER}:
                others = [s for s in nodes if s != name]
                raise ConfigError(
                    f"stages.{name}",
                    f"unknown stage '{name}'; {nearest_hint(name, others)} (a new stage is a "
                    f"`stages.{name}` node naming its class in _target_)",
                )
            if not isinstance(node, Mapping) or not isinstance(node.get("_target_"), str):
                raise ConfigError(
                    f"{group}.{name}", f"needs a `_target_`: the {kind} class to build"
                )
            settings = SETTINGS.get(node["_target_"])
            if settings is not None:
                keywords = {k: v for k, v in node.items() if k not in ("_target_", AFTER)}
                try:
                    settings(**typed_keywords(settings, keywords)).validate()
                except ConfigError as error:
                    raise ConfigError(f"{group}.{name}.{error.key}", error.message) from error


def check_stages(cfg: RunConfig, given_combiners: Sequence[str] = ()) -> None:
    """`retriever.combine` names a `combiners.<name>` node; each stage's `after` names another
    stage (or `fused`: first). Where each stage may run (before or after the cut), and that
    the cut runs once, is the stage classes' to say, checked when the stages are instantiated
    (job.build.stage_specs)."""
    combiners = [*cfg.combiners, *given_combiners]
    if cfg.retriever.combine not in combiners:
        raise ConfigError(
            "retriever.combine",
            f"unknown combiner '{cfg.retriever.combine}'; "
            f"{nearest_hint(cfg.retriever.combine, combiners)} (a new combiner is a "
            f"`combiners.{cfg.retriever.combine}` node naming its class in _target_)",
        )
    if not cfg.stages:
        raise ConfigError("stages", "needs at least the top_k cut: the `final` node")
    for name, node in cfg.stages.items():
        anchor = node.get(AFTER) if isinstance(node, Mapping) else None
        if anchor is None:
            continue
        others = [FIRST, *(s for s in cfg.stages if s != name)]
        if not isinstance(anchor, str) or anchor not in others:
            raise ConfigError(
                f"stages.{name}.{AFTER}",
                f"unknown stage {anchor!r}; {nearest_hint(str(anchor), others)} "
                f"({FIRST}: first, right after the combined ranking)",
            )


def validate(
    cfg: RunConfig, given_arms: Sequence[str] = (), given_combiners: Sequence[str] = ()
) -> None:
    """What Hydra's types cannot check; the first bad key or value raises ConfigError.
    `given_arms`, `given_combiners`: names a library caller passes as objects (not under
    `arms`, `combiners`)."""
    check_known_keys(cfg)
    _positive("top_k", cfg.top_k)
    _positive("retriever.pool_size", cfg.retriever.pool_size)
    if cfg.retriever.pool_size < cfg.top_k:
        # Each arm returns at most pool_size passages: a shorter list would be scored @top_k
        # as if top_k had been retrieved.
        raise ConfigError(
            "retriever.pool_size",
            f"{cfg.retriever.pool_size} is smaller than top_k={cfg.top_k}: each arm would "
            f"return fewer passages than are scored; set retriever.pool_size>={cfg.top_k}",
        )
    if not cfg.retriever.arms:
        raise ConfigError("retriever.arms", "needs at least one arm")
    for i, arm in enumerate(cfg.retriever.arms):
        if arm not in cfg.arms and arm not in given_arms:
            raise ConfigError(
                f"retriever.arms[{i}]",
                f"unknown arm '{arm}'; {nearest_hint(arm, [*cfg.arms, *given_arms])} (a new "
                f"arm is an `arms.{arm}` node naming its class in _target_)",
            )
    if len(set(cfg.retriever.arms)) != len(cfg.retriever.arms):
        raise ConfigError("retriever.arms", f"an arm is listed twice: {list(cfg.retriever.arms)}")
    for i, cutoff in enumerate(cfg.scoring.cutoffs):
        _positive(f"scoring.cutoffs[{i}]", cutoff)
    if cfg.scoring.unit not in UNITS:
        raise ConfigError(
            "scoring.unit",
            f"unknown unit {cfg.scoring.unit!r}; {nearest_hint(cfg.scoring.unit, UNITS)}",
        )
    for name in cfg.scoring.group_by:
        if cfg.scoring.unit == DOC and name.startswith("meta."):
            # meta.<field> reads the relevant passages; document labels name no passage.
            raise ConfigError(
                "scoring.group_by",
                f"{name!r} groups by the relevant passages' metadata, which scoring.unit=doc "
                "does not have; group by a query field instead",
            )
    cfg.refusal.validate()
    cfg.robustness.validate()
    _one_of("dataset.format", cfg.dataset.format, DATASET_FORMATS)
    if cfg.dataset.format == "beir" and not cfg.dataset.path:
        raise ConfigError("dataset.path", "a BEIR dataset needs dataset.path=DIR")
    cfg.text.validate()
    cfg.encoder.validate()
    cfg.compare.validate()
    cfg.cost.validate()
    cfg.tracking.validate()
    cfg.benchmark.validate()
    if (
        cfg.benchmark.enabled
        and cfg.benchmark.baseline_from == "tracking"
        and not cfg.tracking.enabled
    ):
        raise ConfigError(
            "benchmark.baseline_from",
            "'tracking' reads earlier months from the tracker: add tracking=mlflow "
            "(and tracking.uri=...)",
        )
    cfg.tune.validate()
    check_plugin_nodes(cfg)
    check_stages(cfg, given_combiners)
