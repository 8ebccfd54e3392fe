"""report.html and comparison.html: one self-contained file each (inline CSS and JS, the data
as embedded JSON, plots as base64 PNG), opened from disk with no network and no server.

The page (`reports/explorer/`) renders the payload of `reports.explorer_data`: the per-type
win/loss heatmap, the per-stage tables, the plots and the query explorer. Its Content Security
Policy forbids every fetch, so a page that works offline is the only kind it can be.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from retrieval_bench.io import atomic_write_text
from retrieval_bench.scoring.families import lower_is_better

JOB_HTML = "report.html"
SWEEP_HTML = "comparison.html"


def _asset(name: str) -> str:
    return (resources.files("retrieval_bench.reports") / "explorer" / name).read_text("utf-8")


def _metric_names(payload: Mapping[str, Any]) -> set[str]:
    names = {m for s in payload["systems"] for m in s["metric_names"]}
    comparison = payload.get("comparison") or {}
    names |= {m["spec"] for m in comparison.get("metrics", [])}
    return {n.split("@", 1)[0] for n in names} | {"hit", "recall", "mrr", "ndcg"}


def render_html(payload: Mapping[str, Any], subtitle: str = "") -> str:
    """The page for one payload. The JSON sits in a `<script type="application/json">`; every
    `<` in it is written `\\u003c`, so no text in a query or passage can close that element."""
    data = {
        **payload,
        "lower_is_better": sorted(n for n in _metric_names(payload) if lower_is_better(f"{n}@1")),
    }
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    text = text.replace("<", "\\u003c")
    title = html.escape(str(payload["meta"]["title"]))
    page = _asset("explorer.html")
    for key, value in (
        ("{{CSS}}", _asset("explorer.css")),
        ("{{JS}}", _asset("explorer.js")),
        ("{{TITLE}}", title),
        ("{{SUBTITLE}}", html.escape(subtitle)),
    ):
        page = page.replace(key, value)
    return page.replace("{{DATA}}", text)


def write_html(path: Path, payload: Mapping[str, Any], subtitle: str = "") -> Path:
    """Write the page atomically; returns its path."""
    atomic_write_text(path, render_html(payload, subtitle))
    return path
