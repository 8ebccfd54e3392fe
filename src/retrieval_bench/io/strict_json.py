"""Strict JSON: what every file the project writes holds. JSON has no NaN or Infinity (a mean
over no query, an unbounded CI end) and other tools' parsers refuse them, so they are written as
null, and the reason sits beside them where one is known."""

from __future__ import annotations

import json
import math
from typing import Any


def json_number(value: float) -> float | None:
    """`value`, or None where JSON has no number for it (infinite, NaN)."""
    return float(value) if math.isfinite(value) else None


def strict_json(value: Any) -> Any:
    """`value` with every non-finite float (a mean over no query) as null: JSON has no NaN or
    Infinity, and other tools' parsers refuse them. Infinite CI ends say why beside them
    (`ci_unbounded`, written by the tests themselves)."""
    if isinstance(value, float):
        return json_number(value)
    if isinstance(value, dict):
        return {k: strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(v) for v in value]
    return value


def strict_dumps(obj: Any, **kwargs: Any) -> str:
    """`json.dumps(obj, ensure_ascii=False, **kwargs)` as strict JSON: a non-finite float (a
    NaN in a config, a mean over no query) is written as null (`strict_json`), never as the bare
    `NaN` / `Infinity` Python's encoder writes by default and other parsers refuse. The common
    case, nothing to replace, costs one encoding."""
    try:
        return json.dumps(obj, ensure_ascii=False, allow_nan=False, **kwargs)
    except ValueError:
        return json.dumps(strict_json(obj), ensure_ascii=False, allow_nan=False, **kwargs)


def jsonl_text(records: list[dict[str, Any]]) -> str:
    return "".join(strict_dumps(r) + "\n" for r in records)
