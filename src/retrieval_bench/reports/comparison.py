"""comparison.md and the terminal text of a comparison record (`compare.build`).

Every number is the mean over the `n` queries the row names, paired across configurations;
the tests behind each verdict are listed in comparison.md and comparison.json.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from retrieval_bench.reports.tables import markdown_table, text_table


def _num(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:.3f}"


def _signed(value: float) -> str:
    return "—" if math.isnan(value) else f"{value:+.3f}"


def _p(value: float, floor: float | None = None) -> str:
    """A p-value; at the randomized test's floor (no resample as extreme as the data) the
    floor rounded up, as `< 0.0002`: the p-value is below it, not equal to it."""
    if math.isnan(value):
        return "—"
    if floor is not None and value <= floor * (1 + 1e-9):
        exponent = math.floor(math.log10(floor))
        step = 10.0**exponent
        return f"< {math.ceil(floor / step - 1e-9) * step:.{max(0, -exponent)}f}"
    return f"{value:.4f}" if value >= 1e-4 else "<1e-4"


def _p_holm(value: float, floor: float | None) -> str:
    """A Holm p-value; from a p-value at the floor it is an upper bound too: `<= 0.0004`."""
    if floor is None or math.isnan(value) or value <= floor * (1 + 1e-9):
        return _p(value, floor)
    return f"≤ {_p(value)}"


def _floor(test: Mapping[str, Any], settings: Mapping[str, Any]) -> float | None:
    return 2.0 / (settings["n_resamples"] + 1) if test.get("p_at_floor") else None


def _ci(test: Mapping[str, Any]) -> str:
    """The CI with its confidence level (that of its Holm step); `†` where it and the
    verdict disagree (the two resamplings differ at the margin)."""
    text = f"[{_signed(test['ci_low'])}, {_signed(test['ci_high'])}]"
    level = test.get("ci_level")
    if level is not None and not math.isnan(level):
        text += f" {100 * level:.4g}%"
    return text + ("" if test.get("ci_agrees", True) else " †")


def _heading(metric: Mapping[str, Any]) -> str:
    """A metric's heading; marked where it cuts deeper than a job's lists."""
    deep = metric.get("depth_exceeds_list") or {}
    if not deep:
        return str(metric["heading"])
    where = ", ".join(f"{label}: lists of {n}" for label, n in deep.items())
    return f"{metric['heading']} ‡ deeper than the list ({where}): not measured at that depth"


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


def test_rows(ds: Mapping[str, Any], spec: str, settings: Mapping[str, Any]) -> list[list[Any]]:
    rows = []
    for t in ds["types"]:
        for other, test in ds["cells"][spec][t]["tests"].items():
            floor = _floor(test, settings)
            rows.append(
                [
                    t,
                    test["n"],
                    test["against"],
                    other,
                    _signed(test["diff"]),
                    _ci(test),
                    _p(test["p_value"], floor),
                    _p_holm(test["p_holm"], floor),
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
            title = f"{group['group']} — {_heading(m)}"
            yield title, ["type", "n", f"{base} (baseline)", *settings], rows


def _settings_line(settings: Mapping[str, Any]) -> str:
    family = settings.get("family", "cell")
    scope = settings.get("family_scope", "each cell")
    floor = _p(0.0, 2.0 / (settings["n_resamples"] + 1))
    return (
        f"Paired randomization (sign-flip) test, two-sided, {settings['n_resamples']} "
        f"resamples, seed {settings['seed']}; Holm family: {scope}, `compare.family={family}`; "
        f"alpha {settings['alpha']:g}. The CI of the difference is "
        "that test inverted, at the level of its Holm step (the i-th smallest of m p-values: "
        f"1 - {1 - settings['confidence']:.2g} / (m - i)), so it excludes 0 exactly where the "
        f"verdict is significant (`†` if not). `{floor}`: no resample was as extreme as the "
        "data (its Holm p-value is then an upper bound too, `≤`). A group with fewer than "
        f"{settings['min_queries']} paired queries, or too few for any difference to reach "
        "significance after Holm, gets no verdict."
    )


LEGEND = (
    "`win`: best and significantly better than every other configuration; `second`: runner-up "
    "behind a winner, among three or more; `tie`: not significantly different from the best; "
    "`lose`: significantly worse than the best. `n`: queries scored by every configuration in "
    "that row. `all weak`: the best is below `compare.weak_below` times the ideal bound of "
    "the metric there (recall_bound@K for recall; 1 for hit, mrr, ndcg). `‡`: the cut-off is "
    "deeper than the lists the stage returns."
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
            markdown_table(["type", "n", *(_heading(m) for m in ds["metrics"])], best_rows(ds)),
            "",
        ]
        for reason_metric, reason in ds["skipped_metrics"].items():
            lines += [f"Skipped {reason_metric}: {reason}", ""]
        for m in ds["metrics"]:
            lines += [
                f"## {_heading(m)}",
                "",
                markdown_table(["type", "n", *labels, "best"], verdict_rows(ds, m["spec"])),
                "",
                "Tests (best against each other configuration):",
                "",
                markdown_table(
                    ["type", "n", "best", "other", "diff", "CI (Holm level)", "p", "p (Holm)"],
                    test_rows(ds, m["spec"], settings),
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
                f"significant after Holm over {settings.get('family_scope', 'each cell')} "
                "of this group).",
                "",
            ]
            for title, header, rows in ablation_tables(ab, ds["metrics"], ds["types"]):
                lines += [f"### {title}", ""]
                if rows:
                    lines += [markdown_table(header, rows), ""]
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
            f"paired randomization test, Holm over {settings.get('family_scope', 'each cell')}, "
            f"alpha {settings['alpha']:g} ==",
        ]
        for m in ds["metrics"]:
            out += [
                "",
                _heading(m),
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
