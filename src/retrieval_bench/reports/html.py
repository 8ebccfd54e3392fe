"""report.html and comparison.html: one self-contained file each (inline CSS and JS, the data
as embedded JSON, plots as base64 PNG), opened from disk with no network and no server.

The page (`reports/explorer/`) renders the payload of `reports.explorer_data`: the per-type
win/loss heatmap, the per-stage tables, the plots and the query explorer. Its Content Security
Policy forbids every fetch, so a page that works offline is the only kind it can be. Where a
page goes is the caller's (`jobdir.names`: `report.html`, `comparison.html`).
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from retrieval_bench.io.atomic import atomic_write_text
from retrieval_bench.scoring.registry import lower_is_better


def _asset(name: str) -> str:
    return (resources.files("retrieval_bench.reports") / "explorer" / name).read_text("utf-8")


def _lower_is_better(payload: Mapping[str, Any]) -> list[str]:
    """The names (without `@K`) of the metrics the page shows that are better when smaller
    (leak_any, ...), so its colours and "best" marks turn the right way for them."""
    specs = {m for s in payload["systems"] for m in s["metric_names"]}
    specs |= {m["spec"] for m in (payload.get("comparison") or {}).get("metrics", [])}
    return sorted({spec.partition("@")[0] for spec in specs if lower_is_better(spec)})


def render_html(payload: Mapping[str, Any], subtitle: str = "") -> str:
    """The page for one payload. The JSON sits in a `<script type="application/json">`; every
    `<` in it is written `\\u003c`, so no text in a query or passage can close that element."""
    data = {**payload, "lower_is_better": _lower_is_better(payload)}
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    text = text.replace("<", "\\u003c")
    title = html.escape(str(payload["meta"]["title"]))
    page = _asset("explorer.html")
    for key, value in (
        ("{{CSS}}", _asset("explorer.css")),
        # The explorer, then a sweep's tiers and cost beside quality (a script of its own).
        ("{{JS}}", _asset("explorer.js") + "\n" + _asset("tiers.js")),
        ("{{TITLE}}", title),
        ("{{SUBTITLE}}", html.escape(subtitle)),
    ):
        page = page.replace(key, value)
    return page.replace("{{DATA}}", text)


def write_html(path: Path, payload: Mapping[str, Any], subtitle: str = "") -> Path:
    """Write the page atomically; returns its path."""
    atomic_write_text(path, render_html(payload, subtitle))
    return path
