"""The keys this release moved to their one home, and the one mapping that still reads the old
spellings (for this release): every command line, `compose(overrides)`, sweep, tuning space and
baseline that names an old key is rewritten to the new key before Hydra sees it, with one notice
line per old key (`renamed key: bm25.k1 -> arms.bm25.k1 ...`), which the job's manifest.json
records under `renamed_keys`.

What is read here: Hydra override strings (`key=value`, `+key=value`, `++key=value`, `~key`,
sweeps `key=a,b`) and dotted keys (a tuning space's, a baseline's KEY=VALUE, a gate's
`allow_plan_changes`). An old key inside a YAML file (a `--config-dir` preset) is not rewritten:
Hydra refuses it, and the app's message names the new key (`run.exits.renamed_in_file`).

`renamed_table()` is the reference page's table (docs/reference/renamed-keys.md), generated from
`RENAMES`, so the page and the mapping cannot drift (a test compares them)."""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from retrieval_bench.config import targets
from retrieval_bench.errors import ConfigError

log = logging.getLogger(__name__)

# The environment variable through which `python -m run` hands the notices of its command line
# to its jobs (a launcher may run them in other processes), for manifest.json.
ENV = "RETRIEVAL_BENCH_RENAMED_KEYS"


@dataclass(frozen=True)
class Rename:
    """`old` (a key, or with `node` every key under it) now lives at `new`."""

    old: str
    new: str
    node: bool = False
    # What the notice and the reference table add (how the meaning carried over).
    note: str = ""
    # The plug-in class of the node `new` names: a node of the same class that the same command
    # line adds (`+arms.mine={_target_: <it>, ...}`) read the old node's keys it does not set
    # itself, so it follows `new`'s (by interpolation) where the old key set them.
    target: str = ""

    def match(self, key: str) -> str | None:
        """`key` under its new name, or None when this rename does not cover it."""
        if key == self.old:
            return self.new
        if self.node and key.startswith(self.old + "."):
            return self.new + key[len(self.old) :]
        return None


# The one mapping. Order matters only where one entry's old key lies under another's (the
# specific one first).
RENAMES: tuple[Rename, ...] = (
    Rename(
        "bm25",
        "arms.bm25",
        node=True,
        note="the BM25 arm's keyword arguments; the shipped bm25_* arms follow arms.bm25's",
        target=targets.BM25_SPEC,
    ),
    Rename(
        "dense",
        "arms.dense",
        node=True,
        note="the dense arm's index settings, its keyword arguments",
        target=targets.DENSE_SPEC,
    ),
    Rename(
        "m3",
        "arms.m3",
        node=True,
        note="the BGE-M3 arm's keyword arguments; the shipped m3_* arms follow arms.m3's",
        target=targets.M3_SPEC,
    ),
    Rename(
        "run_file",
        "arms.run_file",
        node=True,
        note="the run_file arm's keyword argument",
        target=targets.RUN_FILE_SPEC,
    ),
    Rename(
        "service",
        "arms.service",
        node=True,
        note="the service arm's keyword arguments",
        target=targets.SERVICE_SPEC,
    ),
    Rename(
        "reranker.kind",
        "reranker",
        note="the config group: reranker.kind=cross_encoder is reranker=cross_encoder",
    ),
    Rename(
        "reranker",
        "stages.rerank",
        node=True,
        note="the rerank stage's keyword arguments; it runs when stages.rerank.model names one",
        target=targets.RERANK,
    ),
    Rename(
        "context",
        "stages.context",
        node=True,
        note="the context stage's keyword arguments",
        target=targets.CONTEXT,
    ),
    Rename(
        "pipeline",
        "stages",
        note="a stage runs where its class places it, or after the stage its `after` names: "
        "pipeline=[a,b,c] is stages.b.after=a, stages.c.after=b, and removes the shipped "
        "stages it leaves out (~stages.context)",
    ),
    Rename("retriever.rrf_k", "combiners.rrf.k", note="fill's k follows it, as before"),
    Rename("retriever.normalize", "combiners.score.normalize"),
    Rename("retriever.method", "combiners.score.method"),
    Rename(
        "compare.baseline",
        "compare.baselines",
        note="one baseline is a list of one: compare.baseline=X is compare.baselines=[X]",
    ),
)
# Old keys whose value changes shape, not only its key (each handled in `_rewrite_one`).
_WRAP_IN_LIST = {"compare.baseline"}
_GROUP_VALUE = {"reranker.kind"}
PIPELINE = "pipeline"
# The shipped stages (config.schema.BUILTIN_STAGES) an old `pipeline` could leave out.
_SHIPPED_STAGES = ("rerank", "final", "context")
# Config groups: `reranker=cross_encoder` picks a preset, it is no key to rename.
_GROUPS = frozenset({"reranker"})


@dataclass(frozen=True)
class Notice:
    """One old key met, and its new home."""

    old: str
    new: str

    def line(self) -> str:
        return f"renamed key: {self.old} -> {self.new} (the old spelling is read for this release)"

    def to_json(self) -> dict[str, str]:
        return {"old": self.old, "new": self.new}


def rename_key(key: str) -> str | None:
    """The new name of an old dotted key (`bm25.k1` -> `arms.bm25.k1`), or None when `key` was
    not renamed."""
    rename = _rename_of(key)
    return None if rename is None else rename.match(key)


def _rename_of(key: str) -> Rename | None:
    if key in _GROUPS:
        return None
    return next((r for r in RENAMES if r.match(key) is not None), None)


_OVERRIDE = re.compile(r"^(?P<prefix>~|\+\+|\+)?(?P<key>[^=~+][^=]*?)(?P<rest>=.*)?$", re.DOTALL)


def _rewrite_one(text: str) -> tuple[list[str], Notice | None]:
    """One override string, rewritten (one old override may become several), and its notice."""
    match = _OVERRIDE.match(text)
    if not match:
        return [text], None
    prefix, key, rest = match.group("prefix") or "", match.group("key"), match.group("rest")
    if key.startswith("hydra.") or "/" in key or "@" in key:
        return [text], None
    new = rename_key(key)
    if new is None:
        return [text], None
    if key == PIPELINE and rest is not None:
        return _pipeline(text, rest[1:]), Notice(key, "stages.<name>.after")
    if key in _GROUP_VALUE and rest is not None:
        return [f"{new}{rest}"], Notice(key, new)
    if key in _WRAP_IN_LIST and rest is not None:
        value = rest[1:]
        if _is_sweep(value):
            raise ConfigError(
                key, f"{text!r}: a sweep of the old key cannot be read; use {new}=[...]"
            )
        rest = f"=[{value}]"
    return [f"{prefix}{new}{rest or ''}"], Notice(key, new)


def _pipeline(text: str, value: str) -> list[str]:
    """`pipeline=[a,b,c]` as the stages' own keys: each listed stage placed after the one
    before it (the first after `fused`), each shipped stage it leaves out removed."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    if _is_sweep(value):
        raise ConfigError(
            PIPELINE,
            f"{text!r}: a sweep of the old key cannot be read; sweep a stage's own keys "
            "instead (stages.<name>.after, or ~stages.<name> in separate runs)",
        )
    names = OverridesParser.create().parse_override(f"x={value}").value()
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ConfigError(PIPELINE, f"{text!r}: expected a list of stage names")
    out = [f"~stages.{name}" for name in _SHIPPED_STAGES if name not in names]
    previous = "fused"
    for name in names:
        out.append(f"++stages.{name}.after={previous}")
        previous = name
    return out


def _is_sweep(value: str) -> bool:
    """Whether an override's value is a Hydra sweep (`a,b`, `range(...)`, ...)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_override(f"x={value}")
    except Exception:
        return False
    return bool(parsed.is_sweep_override())


def rewrite_overrides(overrides: Sequence[str]) -> tuple[list[str], list[Notice]]:
    """Every override in its new spelling, and one notice per old key met (in order, each
    once). New spellings pass unchanged, so rewriting twice changes nothing.

    An old node's key (`m3.model=DIR`) set that key for every plug-in of its class, a node the
    same command line adds included (`+arms.m3_lex={_target_: ...M3Spec, mode: all}`): such a
    node, where it does not set the key itself, follows the new home by interpolation
    (`++arms.m3_lex.model=${arms.m3.model}`, appended after everything else)."""
    out: list[str] = []
    notices: dict[str, Notice] = {}
    follow: dict[str, None] = {}
    added = _added_nodes(overrides)
    for text in overrides:
        rewritten, notice = _rewrite_one(text)
        out.extend(rewritten)
        if notice is None:
            continue
        notices.setdefault(notice.old, notice)
        rename = _rename_of(notice.old)
        field = notice.old[len(rename.old) + 1 :].split(".")[0] if rename else ""
        if rename is None or not rename.target or not field or text.startswith("~"):
            continue
        group = rename.new.split(".")[0]
        for (node_group, name), (target, keys) in added.items():
            own = f"{node_group}.{name}"
            ours = node_group == group and target == rename.target and own != rename.new
            if ours and field not in keys:
                follow.setdefault(f"++{own}.{field}=${{{rename.new}.{field}}}")
    return [*out, *follow], list(notices.values())


def _added_nodes(overrides: Sequence[str]) -> dict[tuple[str, str], tuple[str, set[str]]]:
    """(group, name) -> (class, keys it sets) of each plug-in node the overrides add or write
    (`+arms.x={_target_: ..., k: v}`, `+arms.x._target_=...`, `arms.x.k=v`)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    found: dict[tuple[str, str], tuple[str, set[str]]] = {}
    for text in overrides:
        match = _OVERRIDE.match(text)
        if not match or match.group("prefix") == "~" or match.group("rest") is None:
            continue
        parts = match.group("key").split(".")
        if parts[0] not in ("arms", "stages", "combiners") or len(parts) < 2:
            continue
        try:
            override = parser.parse_override(text)
            value = None if override.is_sweep_override() else override.value()
        except Exception:
            continue
        target, keys = found.get((parts[0], parts[1]), ("", set()))
        if len(parts) == 2 and isinstance(value, dict):
            target = str(value.get("_target_", target))
            keys |= {str(k) for k in value if k != "_target_"}
        elif len(parts) == 3 and parts[2] == "_target_":
            target = str(value)
        elif len(parts) >= 3:
            keys.add(parts[2])
        found[(parts[0], parts[1])] = (target, keys)
    return found


def rename_keys(keys: Iterable[str], where: str) -> tuple[dict[str, str], list[Notice]]:
    """Old key -> new key for each of `keys` that was renamed (a tuning space's keys, a
    baseline's), announced as met under `where` (the config key that holds them)."""
    found: dict[str, str] = {}
    notices = []
    for key in keys:
        new = rename_key(key.lstrip("+"))
        if new is not None:
            found[key] = new
            notices.append(Notice(f"{where}: {key.lstrip('+')}", new))
    return found, notices


def announce(notices: Sequence[Notice]) -> None:
    """One line per old key, on stderr (through logging, so a job's log has it too)."""
    for notice in notices:
        log.warning(notice.line())


def from_environment() -> list[dict[str, str]]:
    """The notices `python -m run` met on its command line (manifest.json's `renamed_keys`)."""
    text = os.environ.get(ENV, "")
    if not text:
        return []
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return []
    return [dict(item) for item in value if isinstance(item, dict)]


def to_environment(notices: Sequence[Notice]) -> None:
    """Hand the command line's notices to its jobs (same process or a launcher's)."""
    os.environ[ENV] = json.dumps([n.to_json() for n in notices]) if notices else ""


def renamed_table() -> str:
    """The table of every old key, its new home and what carried over (Markdown)."""
    rows = ["| old key | new key | note |", "|---|---|---|"]
    for rename in RENAMES:
        old = f"`{rename.old}.*`" if rename.node else f"`{rename.old}`"
        new = f"`{rename.new}.*`" if rename.node else f"`{rename.new}`"
        rows.append(f"| {old} | {new} | {rename.note} |")
    return "\n".join(rows) + "\n"


def renamed_keys_page() -> str:
    """docs/reference/renamed-keys.md, whole: generated from `RENAMES` (a test checks the page
    equals it; regenerate the page with this function after changing the mapping)."""
    return f"""# Renamed keys

Every setting has one home (see *How the config is organised*). The keys below moved there in
this release. Their old spellings still work for this release: on the command line, in
`compose(overrides)`, in a sweep, a tuning space or baseline, a comparison's baselines and a
gate's `allow_plan_changes`, an old key is read as its new one, one line on stderr names the new
key (`renamed key: bm25.k1 -> arms.bm25.k1 ...`), and the job's `manifest.json` records it under
`renamed_keys`. In a YAML file (a `--config-dir` preset) an old key is refused, naming its new
home. `.*` stands for every key under the node (`bm25.k1` is `arms.bm25.k1`).

{renamed_table()}"""
