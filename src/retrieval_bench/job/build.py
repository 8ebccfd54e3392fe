"""Arms built from config: each `arms.<name>` node is instantiated by Hydra (its `_target_` a
class anywhere on the path, its other keys that class's keyword arguments), then built against
the job's corpus. Nothing here knows any arm by name."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, cast

from retrieval_bench.plugins import instantiate_spec
from retrieval_bench.protocols import Arm, ArmSpec, BuildContext


def build_arms(
    names: Sequence[str],
    nodes: Mapping[str, Mapping[str, Any]],
    ctx: BuildContext,
    phase: Callable[[str], AbstractContextManager[Any]],
    given: Mapping[str, Arm | ArmSpec] | None = None,
) -> dict[str, Arm]:
    """Every arm of `names`, from `given` (a library caller's own Arm or ArmSpec objects) or
    else its `nodes[name]` config: each spec's optional `check` runs first (so nothing is
    indexed when any arm cannot run), then each `build`, timed under `phase("index_<name>")`."""
    given = given or {}
    # An object with `build` is a spec (built against the corpus) even if it is also the arm.
    ready = {
        name: cast(Arm, given[name])
        for name in names
        if isinstance(given.get(name), Arm) and not callable(getattr(given[name], "build", None))
    }
    specs: dict[str, ArmSpec] = {
        name: given[name] if name in given else instantiate_spec(name, nodes[name])  # type: ignore[misc]
        for name in names
        if name not in ready
    }
    with phase("load"):
        for name, spec in specs.items():
            check = getattr(spec, "check", None)
            if check is not None:
                check(name, ctx)
    arms: dict[str, Arm] = {}
    for name in names:
        if name in ready:
            arms[name] = ready[name]
            continue
        with phase(f"index_{name}"):
            arms[name] = specs[name].build(name, ctx)
    return arms


