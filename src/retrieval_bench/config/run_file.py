"""The `run_file:` config node: a TREC run from another system used as an arm
(`retriever=run_file run_file.path=RUN`). Imports nothing heavy: the config schema reads it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from retrieval_bench.errors import ConfigError

KEY = "run_file.path"
SPEC = "retrieval_bench.retrievers.run_file.RunFileArmSpec"


@dataclass
class RunFileConfig:
    path: str = ""
    """A TREC run (`qid Q0 docid rank score tag`); relative paths resolve against the working
    directory, then the project root. Its qids are the evaluation set's query ids, its docids the
    corpus's passage ids."""

    def validate(self, arms: Sequence[Any] = ()) -> None:
        """`arms`: the config nodes of the arms that run (`arms.<name>` of each name in
        `retriever.arms`). When one is a run_file arm without a `path` of its own, this
        `path` must name an existing file before any work starts."""
        if any(reads_run_file_path(node) for node in arms):
            check_run_path(self.path, KEY)


def reads_run_file_path(node: Any) -> bool:
    """Whether the arm node `node` is a run_file arm reading `run_file.path`."""
    return isinstance(node, Mapping) and node.get("_target_") == SPEC and "path" not in node


def check_run_path(path: str, key: str) -> None:
    """ConfigError naming `key` unless `path` names an existing file."""
    # Imported here: path resolution lives beside the router's config, which imports the
    # pipeline, and this module must stay light.
    from retrieval_bench.paths import resolve_path

    if not path:
        raise ConfigError(key, f"a run_file arm needs a TREC run: set {key}=RUN")
    resolved = resolve_path(path)
    if resolved.is_dir():
        raise ConfigError(
            key, f"run file {path!r} is a folder ({resolved}), not a TREC run: name the file"
        )
    if not resolved.is_file():
        raise ConfigError(key, f"run file {path!r} does not exist (looked at {resolved})")
