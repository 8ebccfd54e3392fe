"""The run_file arm's keyword arguments (`arms.run_file.path`): a TREC run from another system
used as an arm (`retriever=run_file arms.run_file.path=RUN`). Imports nothing heavy: the config
schema reads it."""

from __future__ import annotations

from dataclasses import dataclass

from retrieval_bench.errors import ConfigError


@dataclass
class RunFileConfig:
    """`retrieval_bench.retrievers.run_file.RunFileArmSpec` is this dataclass with `build`."""

    path: str = ""
    """A TREC run (`qid Q0 docid rank score tag`); relative paths resolve against the working
    directory, then the project root. Its qids are the evaluation set's query ids, its docids the
    corpus's passage ids. Required when the arm runs (checked before any work)."""

    def validate(self) -> None:
        """Nothing to check until the arm runs (`check_run_path`): an unset path is the shipped
        node's default."""


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
