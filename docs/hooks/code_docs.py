"""What the code says about itself, read the way mkdocstrings reads it (griffe): the docstrings
of module constants and of dataclass fields (attribute docstrings, the string literal on the
line below an assignment). The reference pages take every line of meaning from here, so a key
or a file name is documented where it is declared, once."""

from __future__ import annotations

import functools
from pathlib import Path

import griffe

SRC = Path(__file__).resolve().parents[2] / "src"


@functools.cache
def _module(name: str) -> griffe.Module:
    """One module parsed from its file alone (griffe.visit: no import, no other module)."""
    path = SRC.joinpath(*name.split("."))
    file = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    return griffe.visit(name, filepath=file, code=file.read_text(encoding="utf-8"))


def attribute_docs(module: str, owner: str | None = None) -> dict[str, str]:
    """Name -> docstring of each documented attribute of `module` (its constants), or of the
    class `owner` in it (its fields). Attributes without a docstring are left out."""
    node: griffe.Object = _module(module)
    if owner is not None:
        for part in owner.split("."):
            member = node.members[part]
            node = member.final_target if isinstance(member, griffe.Alias) else member
    out = {}
    for name, member in node.members.items():
        if isinstance(member, griffe.Alias) or not member.is_attribute:
            continue
        if member.docstring is not None and member.docstring.value.strip():
            out[name] = member.docstring.value.strip()
    return out


def first_sentence(text: str) -> str:
    """The docstring's first paragraph, on one line."""
    paragraph = text.strip().split("\n\n", 1)[0]
    return " ".join(paragraph.split())


def cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")
