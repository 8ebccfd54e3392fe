"""comparison.md and the terminal text of a comparison record (`compare.build`).

Every number is the mean over the `n` queries the row names, paired across configurations;
the tests behind each verdict are listed in comparison.md and comparison.json.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from retrieval_bench.reports.coverage import comparison_coverage_section
from retrieval_bench.reports.tables import markdown_table, text_table


def _num(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:.3f}"


def _signed(value: float) -> str:
    return "—" if math.isnan(value) else f"{value:+.3f}"


def _p(value: float) -> str:
    return "—" if math.isnan(value) else (f"{value:.4f}" if value >= 1e-4 else "<1e-4")


def verdict_rows(ds: Mapping[str, Any], spec: str) -> list[list[Any]]:
    labels = [c["label"] for c in ds["configurations"]]
    rows = []
    for t in ds["types"]:
        cell = ds["cells"][spec][t]
        row: list[Any] = [t, cell["n"]]
        for label in labels:
            text = _num(cell["means"].get(label))
            verdict = cell["verdicts"].get(label)
            row.append(f"{text} {verdict}" if verdict else text)
        row.append(ds["best"][t][spec]["text"])
        rows.append(row)
    return rows


def best_rows(ds: Mapping[str, Any]) -> list[list[Any]]:
    rows = []
    for t in ds["types"]:
        n = max((ds["best"][t][m["spec"]]["n"] for m in ds["metrics"]), default=0)
        rows.append([t, n, *(ds["best"][t][m["spec"]]["text"] for m in ds["metrics"])])
    return rows


def test_rows(ds: Mapping[str, Any], spec: str) -> list[list[Any]]:
    rows = []
    for t in ds["types"]:
        for other, test in ds["cells"][spec][t]["tests"].items():
            rows.append(
                [
                    t,
                    test["n"],
                    test["against"],
                    other,
                    _signed(test["diff"]),
                    f"[{_signed(test['ci_low'])}, {_signed(test['ci_high'])}]",
                    _p(test["p_value"]),
                    _p(test["p_holm"]),
                ]
            )
    return rows


def _delta_text(delta: Mapping[str, Any]) -> str:
    if delta["n"] == 0:
        return "—"
    mark = "*" if delta["significant"] else ""
    return f"{_num(delta['value'])} ({_signed(delta['diff'])}{mark})"


def ablation_tables(
    ab: Mapping[str, Any], metrics: Sequence[Mapping[str, Any]], types: Sequence[str]
) -> Iterator[tuple[str, list[str], list[list[Any]]]]:
    """(title, header, rows) per group x metric; a group without its baseline has no rows."""
    for group in ab["groups"]:
        if group["baseline"] is None:
            yield f"{group['group']}: {group.get('note', '')}", [], []
            continue
        base = group["baseline"]["setting"]
        settings = [s["setting"] for s in group["settings"]]
        for m in metrics:
            deltas = group["deltas"][m["spec"]]
            rows = []
            for t in types:
                cells = deltas[t]
                n = max((d["n"] for d in cells), default=0)
                base_value = cells[0]["baseline"] if cells else float("nan")
                rows.append([t, n, _num(base_value), *(_delta_text(d) for d in cells)])
            title = f"{group['group']} — {m['heading']}"
            yield title, ["type", "n", f"{base} (baseline)", *settings], rows


def _settings_line(settings: Mapping[str, Any]) -> str:
    return (
        f"Paired randomization test (two-sided, {settings['n_resamples']} resamples, seed "
        f"{settings['seed']}), Holm-adjusted across each cell's comparisons, alpha "
        f"{settings['alpha']:g}; {settings['confidence']:.0%} paired bootstrap CI of the "
        f"difference. A group with fewer than {settings['min_queries']} paired queries, or too "
        "few for any difference to reach significance after Holm, gets no verdict."
    )


LEGEND = (
    "`win`: best and significantly better than every other configuration; `second`: runner-up "
    "behind a winner; `tie`: not significantly different from the best; `lose`: significantly "
    "worse than the best. `n`: queries scored by every configuration in that row."
)


def comparison_markdown(record: Mapping[str, Any]) -> str:
    settings = record["settings"]
    lines: list[str] = []
    for name, ds in record["datasets"].items():
        labels = [c["label"] for c in ds["configurations"]]
        lines += [
            f"# Comparison: {name} (stage `{ds['stage']}`)",
            "",
            _settings_line(settings),
            "",
            LEGEND,
            "",
            markdown_table(
                ["configuration", "top_k", "job folder"],
                [[c["label"], c["top_k"], f"`{c['path']}`"] for c in ds["configurations"]],
            ),
            "",
            "## Best configuration per type",
            "",
            markdown_table(["type", "n", *(m["heading"] for m in ds["metrics"])], best_rows(ds)),
            "",
        ]
        for reason_metric, reason in ds["skipped_metrics"].items():
            lines += [f"Skipped {reason_metric}: {reason}", ""]
        for m in ds["metrics"]:
            lines += [
                f"## {m['heading']}",
                "",
                markdown_table(["type", "n", *labels, "best"], verdict_rows(ds, m["spec"])),
                "",
                "Tests (best against each other configuration):",
                "",
                markdown_table(
                    ["type", "n", "best", "other", "diff", "CI", "p", "p (Holm)"],
                    test_rows(ds, m["spec"]),
                ),
                "",
            ]
        ab = ds.get("ablation")
        if ab:
            base = ",".join(f"{k}={v}" for k, v in ab["baseline"].items())
            lines += [
                f"## Ablation against {base}",
                "",
                "Each cell: the setting's mean (its difference from the baseline; `*` = "
                "significant after Holm across the settings of that cell).",
                "",
            ]
            for title, header, rows in ablation_tables(ab, ds["metrics"], ds["types"]):
                lines += [f"### {title}", ""]
                if rows:
                    lines += [markdown_table(header, rows), ""]
        lines += comparison_coverage_section(ds.get("coverage"))
        lines += ["Bad cases per query: `badcases.md`.", ""]
    return "\n".join(lines)


def comparison_text(record: Mapping[str, Any], files: Sequence[Path] = ()) -> str:
    settings = record["settings"]
    out: list[str] = []
    for name, ds in record["datasets"].items():
        labels = [c["label"] for c in ds["configurations"]]
        out += [
            "",
            f"== {name}: {len(labels)} configuration{'s' if len(labels) != 1 else ''}, "
            f"stage {ds['stage']}; "
            f"paired randomization test, Holm, alpha {settings['alpha']:g} ==",
        ]
        for m in ds["metrics"]:
            out += [
                "",
                m["heading"],
                text_table(["type", "n", *labels, "best"], verdict_rows(ds, m["spec"])),
            ]
        ab = ds.get("ablation")
        if ab:
            base = ",".join(f"{k}={v}" for k, v in ab["baseline"].items())
            out += ["", f"Ablation against {base} (value (diff), * = significant after Holm)"]
            for title, header, rows in ablation_tables(ab, ds["metrics"], ds["types"]):
                out += ["", title]
                if rows:
                    out.append(text_table(header, rows))
    if files:
        out += ["", "comparison: " + ", ".join(str(f) for f in files)]
    return "\n".join(out) + "\n"
