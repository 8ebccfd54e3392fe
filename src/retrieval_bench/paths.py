"""Where the project's files are: its root, and how a configured path is resolved.

An input (`dataset.corpus`, `dataset.evalset`, `router.rules_file`, a run file, ...) resolves
against the working directory, then, where it is not there, against the project root, so the
shipped data (`corpus/travel`, `evalsets/travel.jsonl`) is found from any folder. An output
(`cache_dir`, `tune.dir`, the default tuning folder; `benchmark.root` and Hydra's own run and
sweep folders already are) resolves against the working directory only, as Hydra's outputs do: a
command run from another folder never writes into the package's checkout. Nothing else lives
here, so any layer may import it."""

from __future__ import annotations

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def resolve_path(value: str) -> Path:
    """An input's path: a relative one against the working directory, then, where nothing is
    there, against the project root (the shipped data)."""
    path = Path(value).expanduser()
    if path.is_absolute() or path.exists():
        return path.resolve()
    return (PROJECT_ROOT / path).resolve()


def resolve_output(value: str | Path) -> Path:
    """An output's path (a folder or file the command writes): a relative one against the
    working directory only, whether or not it exists yet."""
    return Path(value).expanduser().absolute().resolve()
