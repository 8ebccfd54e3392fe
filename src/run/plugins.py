"""`python -m run.plugins [--kind KIND] [--json]`: every plug-in a config can name, by kind.

The built-ins (the shipped arms, combiners and stages of `config.schema`, the encoders of
`conf/encoder/`, the registered measures) and what installed packages offer under the
entry-point groups (`retrieval_bench.entry_points.GROUPS`), each with what it names and where
it comes from: `built in`, or the distribution and its version. An installed plug-in is used by
its name where a class path would go (`arms.mine._target_=my_bm25`; a measures module by
`scoring.plugins=[my_metrics]`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

import yaml

from retrieval_bench.config.schema import BUILTIN_ARMS, BUILTIN_COMBINERS, BUILTIN_STAGES
from retrieval_bench.entry_points import GROUPS, installed
from retrieval_bench.paths import PROJECT_ROOT
from retrieval_bench.scoring.registry import measures
from run.exits import guarded

BUILT_IN = "built in"


def _builtin_encoders() -> dict[str, str]:
    """`encoder=<option>` -> the class its `conf/encoder/<option>.yaml` names."""
    found = {}
    for path in sorted((PROJECT_ROOT / "conf" / "encoder").glob("*.yaml")):
        node = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        if isinstance(node, dict) and isinstance(node.get("_target_"), str):
            found[path.stem] = node["_target_"]
    return found


def catalog(kind: str | None = None) -> list[dict[str, str]]:
    """Every plug-in of `kind` (or of every kind): kind, name, target, origin; the built-ins of
    a kind first, then what is installed."""
    builtins: dict[str, dict[str, str]] = {
        "arms": {name: str(node["_target_"]) for name, node in BUILTIN_ARMS.items()},
        "combiners": {name: str(node["_target_"]) for name, node in BUILTIN_COMBINERS.items()},
        "stages": {name: str(node["_target_"]) for name, node in BUILTIN_STAGES.items()},
        "encoders": _builtin_encoders(),
        # Only the built-ins are registered here: no plug-in module was loaded.
        "measures": {m.name: f"scoring.registry, family {m.family}" for m in measures()},
    }
    rows = []
    for k in [kind] if kind is not None else list(GROUPS):
        rows += [
            {"kind": k, "name": name, "target": target, "origin": BUILT_IN}
            for name, target in builtins[k].items()
        ]
        rows += [
            {"kind": p.kind, "name": p.name, "target": p.value, "origin": p.origin}
            for p in installed(k)
        ]
    return rows


def listing(rows: Sequence[dict[str, str]]) -> str:
    """The plug-ins as text: a block per kind, headed by its entry-point group."""
    out: list[str] = []
    for kind in GROUPS:
        mine = [r for r in rows if r["kind"] == kind]
        if not mine:
            continue
        if out:
            out.append("")
        out.append(f"{kind} (entry-point group {GROUPS[kind]})")
        name_w = max(len(r["name"]) for r in mine)
        target_w = max(len(r["target"]) for r in mine)
        out += [
            f"  {r['name'].ljust(name_w)}  {r['target'].ljust(target_w)}  {r['origin']}"
            for r in mine
        ]
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    """The command, with the exit codes of run.exits for whatever escapes it."""
    return guarded(lambda: _main(argv))


def _main(argv: Sequence[str] | None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m run.plugins",
        description="List the plug-ins a config can name: the built-ins and those installed "
        "packages offer through entry points.",
    )
    parser.add_argument("--kind", choices=list(GROUPS), help="only plug-ins of this kind")
    parser.add_argument("--json", action="store_true", help="one JSON list instead of text")
    args = parser.parse_args(argv)
    rows = catalog(args.kind)
    text: Any = json.dumps(rows, ensure_ascii=False, indent=2) if args.json else listing(rows)
    print(text, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
