"""Every config key and command-line flag a docs page names exists, in the spelling the docs
teach.

What is checked, per page (fenced blocks and prose alike):

* in a command (a fenced `bash` block's line, or an inline code span that is a command),
  `python -m run ... key=value`: each override's key (`+key=`, `~key` too) must be a key of the
  schema (`reference_config.schema_keys`) or lie under a mapping a user fills freely (a new arm
  under `arms.<name>`, a route under `router.routes.<name>`, ...), or be `hydra.*`, or name a
  config group of `conf/` (`retriever=bm25`);
* in such a command, `python -m run.<tool> --flag`: the tool must exist and take the flag
  (`reference_cli.known_flags`, subcommands included);
* an inline code span that is a dotted key (`arms.bm25.k1`, or `key=value`) whose first part is
  a top-level key of the schema, unless it is a module path of the package
  (`scoring.units` the module).

A key that the config helper renamed (`config.renamed`) is refused too, naming its new home:
the docs teach the new spelling. Each problem is one line, `docs/<page>:<line>: ...`, with the
nearest known name.
"""

from __future__ import annotations

import difflib
import functools
import re
import shlex
from collections.abc import Iterator

from code_docs import SRC

ROOT = SRC.parent
OVERRIDE = re.compile(r"^(?:\+\+|\+|~)?(?P<key>[A-Za-z_][\w.]*(?:@[\w.]+)?)(?:=|$)")
INLINE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
FENCE = re.compile(r"^(\s*)(```|~~~)(\S*)")
# A dotted name ending so is a file (`tune.json`, `refusal.py`), not a key.
FILE_SUFFIXES = {"json", "jsonl", "md", "png", "py", "csv", "yaml", "yml", "html", "txt", "run",
                 "trec", "tsv", "parquet", "qrels", "log", "npy"}  # fmt: skip
# The page that lists the old spellings beside their new homes.
OLD_SPELLINGS_PAGE = "reference/renamed-keys.md"
# Written on the line before a fenced block that shows a mistake on purpose (a typo and the
# error it gets): the block's names are not checked.
SHOWS_A_MISTAKE = "<!-- docs-check: shows a mistake -->"
APP = re.compile(r"python\d?\s+-m\s+run(?:\.(?P<tool>\w+))?(?=\s|$)")


@functools.cache
def _known() -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """(every schema key, every node path above one, the free mappings' paths)."""
    import dataclasses
    import typing

    import reference_config

    from retrieval_bench.config import RunConfig

    keys = {k.path for k in reference_config.schema_keys()}
    nodes = {".".join(k.split(".")[:i]) for k in keys for i in range(1, k.count(".") + 1)}
    free = {"arms", "combiners", "stages", "hydra"}

    def walk(cls: type, prefix: str) -> None:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            hint = hints.get(f.name)
            if isinstance(hint, type) and dataclasses.is_dataclass(hint):
                walk(hint, f"{prefix}{f.name}.")
            elif typing.get_origin(hint) is dict or hint is typing.Any:
                free.add(f"{prefix}{f.name}")

    walk(RunConfig, "")
    return frozenset(keys), frozenset(nodes), frozenset(free)


@functools.cache
def _typed_plugin_nodes() -> dict[str, frozenset[str]]:
    """`arms.bm25_nohmm` (a shipped node whose class has a settings dataclass) -> the keys its
    node takes (`k1`, `text`, ..., `_target_`), so a typo under a shipped node is caught."""
    import dataclasses

    from retrieval_bench.config import schema

    settings = getattr(schema, "SETTINGS", {})
    out = {}
    for group, nodes in (
        ("arms", schema.BUILTIN_ARMS),
        ("combiners", schema.BUILTIN_COMBINERS),
        ("stages", schema.BUILTIN_STAGES),
    ):
        for name, node in nodes.items():
            cls = settings.get(node.get("_target_"))
            if cls is not None:
                names = {f.name for f in dataclasses.fields(cls)} | {"_target_"}
                out[f"{group}.{name}"] = frozenset(names)
    return out


@functools.cache
def _groups() -> frozenset[str]:
    """Config groups of conf/ (`retriever`, `experiment`, ...): `group=option` picks a file."""
    return frozenset(p.name for p in (ROOT / "conf").iterdir() if p.is_dir())


@functools.cache
def _flags() -> dict[str, set[str]]:
    import reference_cli

    return reference_cli.known_flags()


def _is_module(dotted: str) -> bool:
    path = SRC / "retrieval_bench" / dotted.replace(".", "/")
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _nearest(name: str, known: set[str] | frozenset[str]) -> str:
    match = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.5)
    return f"; did you mean '{match[0]}'?" if match else ""


def key_problem(key: str) -> str | None:
    """Why `key` (an override's left side, no `+`/`~`) is not one the docs may name, or None."""
    from retrieval_bench.config.renamed import rename_key

    keys, nodes, free = _known()
    key = key.split("@", 1)[0]
    if key in keys or key in nodes or key.rsplit(".", 1)[-1] in FILE_SUFFIXES:
        return None
    parts = key.split(".")
    if len(parts) == 1 and key in _groups():
        return None
    typed = _typed_plugin_nodes().get(".".join(parts[:2]))
    if typed is not None and len(parts) > 2 and parts[2] not in typed:
        return (
            f"unknown config key '{key}'{_nearest(parts[2], typed)} (under {'.'.join(parts[:2])})"
        )
    if any(".".join(parts[:i]) in free for i in range(1, len(parts))):
        return None
    if "." in key and parts[0] in _groups() and parts[0] not in keys | nodes:
        return None  # hydra/launcher=..., a group path
    renamed = rename_key(key)
    if renamed is not None:
        return f"'{key}' is an old spelling: write '{renamed}'"
    return f"unknown config key '{key}'{_nearest(key, keys)}"


def _command_problems(command: str) -> Iterator[str]:
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        words = command.split()
    app = APP.search(command)
    if app is None:
        return
    tool = app.group("tool")
    # The words after `python -m run[.tool]`, up to a shell operator.
    start = next(
        (i + 1 for i, w in enumerate(words) if w == (f"run.{tool}" if tool else "run")), None
    )
    if start is None:
        return
    args: list[str] = []
    for word in words[start:]:
        if word in {"|", "||", "&&", ";", ">", ">>", "2>&1", "&"}:
            break
        args.append(word)
    if tool is None:
        for word in args:
            if word.startswith("-"):
                continue
            match = OVERRIDE.match(word)
            if match and ("=" in word or word.startswith("~")):
                problem = key_problem(match.group("key"))
                if problem:
                    yield problem
        return
    flags = _flags().get(f"run.{tool}")
    if flags is None:
        yield f"unknown tool 'python -m run.{tool}'{_nearest(f'run.{tool}', set(_flags()))}"
        return
    for word in args:
        if word.startswith("--"):
            flag = word.split("=", 1)[0]
            if flag not in flags:
                yield f"run.{tool} has no flag '{flag}'{_nearest(flag, flags)}"


def _inline_problems(code: str) -> Iterator[str]:
    code = code.strip()
    if APP.search(code):
        yield from _command_problems(code)
        return
    match = OVERRIDE.match(code)
    if match is None or " " in code.split("=", 1)[0]:
        return
    key = match.group("key")
    keys = _known()[0]
    top = {k.split(".", 1)[0] for k in keys}
    if "." not in key and "=" not in code:
        return  # a bare word: a value, a name, not necessarily a key
    from retrieval_bench.config.renamed import rename_key

    if rename_key(key) is None and (
        key.split(".", 1)[0] not in top or _is_module(key.split("@", 1)[0])
    ):
        return
    problem = key_problem(key)
    if problem:
        yield problem


def problems(uri: str, markdown: str) -> list[str]:
    """One line per unknown or renamed key or flag the page names: `docs/<uri>:<line>: ...`."""
    out: list[str] = []
    fence: str | None = None
    language = ""
    pending = ""
    pending_line = 0
    previous = ""
    for number, line in enumerate(markdown.splitlines(), start=1):
        opening = FENCE.match(line)
        if opening and fence is None:
            fence, language = opening.group(2), opening.group(3)
            if previous.strip() == SHOWS_A_MISTAKE:
                language = "unchecked"
            continue
        previous = line
        if fence is not None:
            if line.strip().startswith(fence):
                fence = None
                continue
            if language in {"bash", "sh", "shell", "console"}:
                if not pending:
                    pending_line = number  # a continued command is named by its first line
                if line.endswith("\\"):
                    pending += line[:-1] + " "
                    continue
                where = f"docs/{uri}:{pending_line}"
                out += [f"{where}: {p}" for p in _command_problems(pending + line)]
                pending = ""
            continue
        for code in INLINE.findall(line):
            out += [f"docs/{uri}:{number}: {p}" for p in _inline_problems(code)]
    if uri == OLD_SPELLINGS_PAGE:
        out = [line for line in out if "is an old spelling" not in line]
    return out
