"""Where the project's files are: its root, and how a configured path is resolved against it.
Nothing else lives here, so any layer may import it."""

from __future__ import annotations

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def resolve_path(value: str) -> Path:
    """Relative paths resolve against the working directory, then against the project root."""
    path = Path(value).expanduser()
    if path.is_absolute() or path.exists():
        return path.resolve()
    return (PROJECT_ROOT / path).resolve()
