"""The perturbation kinds by name (`config.robustness.KINDS` lists the same names)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from retrieval_bench.config.robustness import check_kinds
from retrieval_bench.perturb.base import Perturbation, PerturbSettings
from retrieval_bench.perturb.homophone import Homophone
from retrieval_bench.perturb.mixed_script import MixedScript
from retrieval_bench.perturb.script import OpenCCConvert
from retrieval_bench.perturb.spacing import Spacing, Unspacing
from retrieval_bench.perturb.truncate import Truncate
from retrieval_bench.perturb.width import FullWidth, HalfWidth

BUILDERS: dict[str, Callable[[PerturbSettings], Perturbation]] = {
    "traditional": lambda s: OpenCCConvert(
        "traditional", s.opencc_traditional, s.key("traditional")
    ),
    "simplified": lambda s: OpenCCConvert("simplified", s.opencc_simplified, s.key("simplified")),
    "homophone": Homophone,
    "fullwidth": lambda s: FullWidth(),
    "halfwidth": lambda s: HalfWidth(),
    "mixed_script": MixedScript,
    "spacing": lambda s: Spacing(),
    "unspacing": lambda s: Unspacing(),
    "truncate": lambda s: Truncate(s.truncate_chars),
}


def build_kinds(names: Sequence[str], settings: PerturbSettings, key: str) -> list[Perturbation]:
    """The kinds named, in order; ConfigError naming `key` for an unknown or repeated one."""
    check_kinds(list(names), key)
    return [BUILDERS[name](settings) for name in names]
