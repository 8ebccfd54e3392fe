"""A job's plug-ins built from config, all by one convention (retrieval_bench.plugins): each
`arms.<name>`, `combiners.<name>` and `stages.<name>` node names its spec class by `_target_`
(anywhere on the path), the other keys are the class's keyword arguments, and the spec builds
the component against the job's corpus. Nothing here knows a plug-in by name.

Order: every spec is instantiated first (a bad key fails before any work), then every spec's
optional `check(name, ctx)` runs (a missing model fails before any corpus is encoded), then the
stages and combiners build (cheap), then the arms (which may encode and index the corpus).

Every call into a spec (`check`, `active`, `build`) crosses the plug-in boundary
(`plugins.guarded_call`: an outside plug-in's exception is its own, exit 2), and what `build`
returns must have its protocol's methods before anything calls them."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, cast

from retrieval_bench.config import RunConfig
from retrieval_bench.config.schema import (
    AFTER,
    BUILTIN_ARMS,
    BUILTIN_COMBINERS,
    BUILTIN_STAGES,
    FIRST,
)
from retrieval_bench.errors import ConfigError
from retrieval_bench.fusion import arm_weights
from retrieval_bench.plugins import guarded_call, instantiate_plugin, require_methods
from retrieval_bench.protocols import (
    AFTER_CUT,
    BEFORE_CUT,
    CUT,
    PLACEMENTS,
    Arm,
    ArmSpec,
    BuildContext,
    Combiner,
    CombinerSpec,
    Stage,
    StageSpec,
)

Phase = Callable[[str], AbstractContextManager[Any]]


def _targets(builtins: Mapping[str, Mapping[str, Any]]) -> list[str]:
    return [str(node["_target_"]) for node in builtins.values()]


def arm_spec(name: str, node: Mapping[str, Any]) -> ArmSpec:
    """The ArmSpec of `arms.<name>`; a bad node fails naming its key."""
    return cast(
        ArmSpec,
        instantiate_plugin(
            f"arms.{name}", node, "ArmSpec", ["build"], _targets(BUILTIN_ARMS), "arms"
        ),
    )


def stage_specs(
    cfg: RunConfig, given: Mapping[str, StageSpec] | None = None
) -> list[tuple[str, StageSpec]]:
    """The spec of every stage of `stages` (and of `given`, a library caller's own StageSpec
    objects by name, replacing a node of the same name, placed by their class or their `after`
    attribute), in the order they run (`stage_order`), with their placement checked: the top_k
    cut once, every stage that runs before it before it, every one that runs after it after it;
    a misplaced stage is named with the key that placed it."""
    given = given or {}
    specs: dict[str, StageSpec] = {}
    placements: dict[str, str] = {}
    anchors: dict[str, str] = {}
    for name, obj in given.items():
        if not callable(getattr(obj, "build", None)) or not callable(getattr(obj, "active", None)):
            raise ConfigError(
                f"stages.{name}",
                f"{type(obj).__qualname__} is not a StageSpec: it needs placement, active() "
                "and build() (retrieval_bench.protocols)",
            )
    for name, node in {**cfg.stages, **{n: {} for n in given}}.items():
        if name in given:
            spec, after = given[name], getattr(given[name], AFTER, None)
        else:
            after = node.get(AFTER)
            spec = cast(
                StageSpec,
                instantiate_plugin(
                    f"stages.{name}",
                    {k: v for k, v in node.items() if k != AFTER},
                    "StageSpec",
                    ["active", "build"],
                    _targets(BUILTIN_STAGES),
                    "stages",
                ),
            )
        if after is not None:
            anchors[name] = str(after)
        placement = getattr(spec, "placement", None)
        if placement not in PLACEMENTS:
            raise ConfigError(
                f"stages.{name}._target_",
                f"{type(spec).__qualname__}.placement is {placement!r}: a stage says where it "
                f"runs, one of {', '.join(PLACEMENTS)}",
            )
        specs[name], placements[name] = spec, placement
    order = stage_order(list(specs), placements, anchors)
    cuts = [name for name in order if placements[name] == CUT]
    if len(cuts) != 1:
        raise ConfigError(
            "stages",
            f"needs the top_k cut exactly once, found {len(cuts)} ({', '.join(cuts) or 'none'}) "
            f"among {order}; the shipped cut is `final`",
        )
    at = order.index(cuts[0])
    for i, name in enumerate(order):
        placement = placements[name]
        if (placement == BEFORE_CUT and i > at) or (placement == AFTER_CUT and i < at):
            side = "before" if placement == BEFORE_CUT else "after"
            raise ConfigError(
                f"stages.{name}.{AFTER}" if name in anchors else f"stages.{name}",
                f"stage '{name}' runs {side} the top_k cut, but it is placed "
                f"{'after' if side == 'before' else 'before'} '{cuts[0]}' (stages in order: "
                f"{order})",
            )
    return [(name, specs[name]) for name in order]


def stage_order(
    names: Sequence[str], placements: Mapping[str, str], anchors: Mapping[str, str]
) -> list[str]:
    """The order the stages run in: those without an `after` where their class places them
    (before the cut, the cut, after it), each group in the order the nodes are declared; each
    stage with `after: X` right after X (and after the stages placed after X before it), X
    `fused` meaning first. A stage that can be placed after none (a cycle) is refused naming
    its `after`."""
    followers: dict[str, list[str]] = {}
    for name in names:
        if name in anchors:
            followers.setdefault(anchors[name], []).append(name)

    def run(name: str) -> list[str]:
        return [name, *(f for follower in followers.get(name, []) for f in run(follower))]

    placed = [n for p in PLACEMENTS for n in names if n not in anchors and placements[n] == p]
    order = [f for first in followers.get(FIRST, []) for f in run(first)]
    order += [n for name in placed for n in run(name)]
    left = [name for name in names if name not in order]
    if left:
        raise ConfigError(
            f"stages.{left[0]}.{AFTER}",
            f"stages {', '.join(left)} are each placed after another of them: a cycle; place "
            f"one after a stage outside it (or after {FIRST}: first)",
        )
    return order


def combiner_spec(name: str, node: Mapping[str, Any]) -> CombinerSpec:
    return cast(
        CombinerSpec,
        instantiate_plugin(
            f"combiners.{name}",
            node,
            "CombinerSpec",
            ["build"],
            _targets(BUILTIN_COMBINERS),
            "combiners",
        ),
    )


def run_checks(specs: Mapping[str, object], ctx: BuildContext, kind: str) -> None:
    """Each spec's optional `check(name, ctx)`, keyed by the name it was configured under
    (`kind`: "arm" or "stage", for the message naming a plug-in that raised)."""
    for name, spec in specs.items():
        check = getattr(spec, "check", None)
        if check is not None:
            guarded_call(f"{kind} '{name}'", spec, check, name, ctx)


def active_stages(
    cfg: RunConfig, ctx: BuildContext, given: Mapping[str, StageSpec] | None = None
) -> list[tuple[str, StageSpec]]:
    """The stages whose settings turn them on (`active(ctx)`), in the order they run (`given`:
    a library caller's own specs, `stage_specs`)."""
    return [
        (name, spec)
        for name, spec in stage_specs(cfg, given)
        if guarded_call(f"stage '{name}'", spec, spec.active, ctx)
    ]


def before_cut(specs: Sequence[tuple[str, StageSpec]]) -> frozenset[str]:
    """The names of the stages that run before the top_k cut (the pipeline refuses such a
    stage's ranking when it holds more passages than it was given)."""
    return frozenset(name for name, spec in specs if spec.placement == BEFORE_CUT)


def build_stages(
    specs: Sequence[tuple[str, StageSpec]], ctx: BuildContext
) -> list[tuple[str, Stage]]:
    """Each stage built, in the order they run (the caller leaves out the inactive ones: those
    whose settings turn them off)."""
    built = []
    for name, spec in specs:
        what = f"stage '{name}'"
        stage = guarded_call(what, spec, spec.build, name, ctx)
        require_methods(what, spec, stage, "Stage", ["apply", "info"])
        built.append((name, stage))
    return built


def build_combiners(
    cfg: RunConfig,
    names: Sequence[str],
    ctx: BuildContext,
    weights: tuple[float, ...] | None = None,
    given: Mapping[str, Combiner | CombinerSpec] | None = None,
) -> dict[str, Combiner]:
    """Each combiner a strategy of the job names, for the pools of `retriever.arms` in order,
    with `weights` (default `retriever.weights`; a query type's own vector of
    `retriever.type_weights` for that type's combiners). `given`: a library caller's own
    combiners by name (a ready Combiner, or a CombinerSpec built here), before the nodes."""
    if weights is None:
        weights = arm_weights(cfg.retriever, cfg.retriever.arms)
    given = given or {}
    built = {}
    for name in names:
        obj = given.get(name)
        if obj is not None and not callable(getattr(obj, "build", None)):
            require_methods(f"combiner '{name}'", obj, obj, "Combiner", ["combine"])
            built[name] = cast(Combiner, obj)
            continue
        if obj is None and name not in cfg.combiners:
            raise ConfigError(
                "retriever.combine",
                f"unknown combiner '{name}' (combiners: {', '.join(cfg.combiners)})",
            )
        spec = (
            cast(CombinerSpec, obj)
            if obj is not None
            else combiner_spec(name, cfg.combiners[name])
        )
        what = f"combiner '{name}'"
        combiner = guarded_call(what, spec, spec.build, name, ctx, weights)
        require_methods(what, spec, combiner, "Combiner", ["combine"])
        built[name] = combiner
    return built


def arm_specs(
    names: Sequence[str],
    nodes: Mapping[str, Mapping[str, Any]],
    given: Mapping[str, Arm | ArmSpec] | None = None,
) -> tuple[dict[str, Arm], dict[str, ArmSpec]]:
    """(ready arms, specs) for `names`: from `given` (a library caller's own Arm or ArmSpec
    objects) or else their `nodes[name]` config. An object with `build` is a spec (built against
    the corpus) even if it is also the arm."""
    given = given or {}
    ready = {
        name: cast(Arm, given[name])
        for name in names
        if isinstance(given.get(name), Arm) and not callable(getattr(given[name], "build", None))
    }
    specs: dict[str, ArmSpec] = {
        name: cast(ArmSpec, given[name]) if name in given else arm_spec(name, nodes[name])
        for name in names
        if name not in ready
    }
    return ready, specs


def build_arms(
    names: Sequence[str],
    ready: Mapping[str, Arm],
    specs: Mapping[str, ArmSpec],
    ctx: BuildContext,
    phase: Phase,
) -> dict[str, Arm]:
    """Every arm of `names`: ready ones as given, the others built, each timed under
    `phase("index_<name>")`."""
    arms: dict[str, Arm] = {}
    for name in names:
        if name in ready:
            arms[name] = ready[name]
            continue
        what, spec = f"arm '{name}'", specs[name]
        with phase(f"index_{name}"):
            arm = guarded_call(what, spec, spec.build, name, ctx)
        require_methods(what, spec, arm, "Arm", ["search", "info"])
        arms[name] = arm
    return arms
