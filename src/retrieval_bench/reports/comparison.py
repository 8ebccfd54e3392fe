"""comparison.md and the terminal text of a comparison record (`compare.build`).

Every number is the mean over the `n` queries the row names, paired across configurations;
the tests behind each verdict are listed in comparison.md and comparison.json.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from retrieval_bench.reports.active_estimates import active_estimates_line, active_estimates_section
from retrieval_bench.reports.coverage import comparison_coverage_section
from retrieval_bench.reports.judge_estimates import estimates_line, estimates_section
from retrieval_bench.reports.pareto import pareto_section
from retrieval_bench.reports.robustness import robustness_markdown, robustness_text
from retrieval_bench.reports.tables import markdown_table, text_table
from retrieval_bench.reports.tiers import tiers_section, tiers_terminal


def _num(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:.3f}"


def _signed(value: float | None) -> str:
    return "—" if value is None or math.isnan(value) else f"{value:+.3f}"


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


def _ci_end(test: Mapping[str, Any], end: str) -> str:
    """A CI end; `unbounded` where no shift could be rejected (JSON null, `ci_unbounded`)."""
    if test.get(end) is None and test.get("ci_unbounded"):
        return "unbounded"
    return _signed(test.get(end))


def _ci(test: Mapping[str, Any]) -> str:
    """The CI with its confidence level (that its correction gives it); `†` where it and
    the verdict disagree (the two resamplings differ at the margin)."""
    text = f"[{_ci_end(test, 'ci_low')}, {_ci_end(test, 'ci_high')}]"
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


def counts_text(entry: Mapping[str, Any]) -> str:
    """PyTerrier's per-query counts, `+improved/-degraded/=unchanged`."""
    if "improved" not in entry:
        return ""
    return f"+{entry['improved']}/-{entry['degraded']}/={entry['unchanged']}"


def power_text(power: Mapping[str, Any] | None) -> str:
    """A compact `MDE / n needed`: `0.081 / 96`; `no variation` for identical systems."""
    if not power:
        return "—"
    if power.get("note") == "no variation":
        return "no variation"
    mde = "none" if power.get("mde") is None else f"{power['mde']:.3f}"
    needed = power.get("n_needed")
    return f"{mde} / {'—' if needed is None else needed}"


def verdict_rows(ds: Mapping[str, Any], spec: str) -> list[list[Any]]:
    """Per type: n, each configuration's mean and verdict (and, for all but the best, its
    queries relative to the best, `+/-/=`), the cell's MDE / n needed, and the best."""
    labels = [c["label"] for c in ds["configurations"]]
    rows = []
    for t in ds["types"]:
        cell = ds["cells"][spec][t]
        row: list[Any] = [t, cell["n"]]
        for label in labels:
            text = _num(cell["means"].get(label))
            verdict = cell["verdicts"].get(label)
            text = f"{text} {verdict}" if verdict else text
            counts = counts_text(cell["tests"].get(label, {}))
            row.append(f"{text} ({counts})" if counts else text)
        row.append(power_text(cell.get("power")))
        row.append(ds["best"][t][spec]["text"])
        rows.append(row)
    return rows


def power_rows(ds: Mapping[str, Any]) -> list[list[Any]]:
    """Per type and metric: the cell's n, its MDE and the queries needed for the target."""
    rows = []
    for t in ds["types"]:
        n = max((ds["cells"][m["spec"]][t]["n"] for m in ds["metrics"]), default=0)
        rows.append(
            [t, n, *(power_text(ds["cells"][m["spec"]][t].get("power")) for m in ds["metrics"])]
        )
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
                    _p_holm(test["p_adjusted"], floor),
                    counts_text(test),
                    power_text(test.get("power")),
                ]
            )
    return rows


def _delta_text(delta: Mapping[str, Any]) -> str:
    if delta["n"] == 0:
        return "—"
    mark = "*" if delta["significant"] else ""
    counts = counts_text(delta)
    power = power_text(delta.get("power"))
    return f"{_num(delta['value'])} ({_signed(delta['diff'])}{mark}; {counts}; {power})"


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


def correction_name(settings: Mapping[str, Any]) -> str:
    return "BH" if settings.get("correction") == "bh" else "Holm"


def _settings_line(settings: Mapping[str, Any]) -> str:
    family = settings.get("family", "cell")
    scope = settings.get("family_scope", "each cell")
    floor = _p(0.0, 2.0 / (settings["n_resamples"] + 1))
    gap = f"{1 - settings['confidence']:.2g}"
    if settings.get("correction") == "bh":
        correction = (
            "Benjamini-Hochberg (false discovery rate), `compare.correction=bh`",
            f"at 1 - R x {gap} / m for every test of the family (R: the tests BH rejects, at "
            "least 1; Benjamini-Yekutieli FCR-adjusted intervals)",
        )
    else:
        correction = (
            "Holm (family-wise error), `compare.correction=holm`",
            f"at the level of its Holm step (the i-th smallest of m p-values: 1 - {gap} / (m - i))",
        )
    name = correction_name(settings)
    return (
        f"Paired randomization (sign-flip) test, two-sided, {settings['n_resamples']} "
        f"resamples, seed {settings['seed']}; correction: {correction[0]}; family: {scope}, "
        f"`compare.family={family}`; alpha {settings['alpha']:g}. The CI of the difference is "
        f"that test inverted, {correction[1]}, so it excludes 0 exactly where the "
        f"verdict is significant (`†` if not); `unbounded`: too few queries for any shift to "
        f"be rejected. `{floor}`: no resample was as extreme as the "
        f"data (its {name} p-value is then an upper bound too, `≤`). A group with fewer than "
        f"{settings['min_queries']} paired queries, or too few for any difference to reach "
        f"significance after {name}, gets no verdict."
    )


def _alphas(ds: Mapping[str, Any]) -> str:
    """The per-test alphas the power of a dataset's cells was computed at, as `0.00104`."""
    found = sorted(
        {
            test["power"]["alpha_test"]
            for cells in ds["cells"].values()
            for cell in cells.values()
            for test in cell["tests"].values()
            if test.get("power")
        }
    )
    return ", ".join(f"{a:.3g}" for a in found) or "—"


def _power_line(settings: Mapping[str, Any], ds: Mapping[str, Any]) -> str:
    return (
        f"`MDE / n`: the minimum detectable effect on these queries at power "
        f"{settings.get('power', 0.8):g} and alpha / m (m: tests in the family; the level one "
        f"test must reach alone; here {_alphas(ds)}), and the queries needed to detect a "
        "difference of "
        f"{settings.get('target_delta', 0.05):g} (the sign-flip test's power as run, through "
        "the t statistic it orders by and its resample count, "
        "from the sd of the per-query differences; for a cell, its largest over the tests "
        "against the best). `no variation`: the difference is the same on every query (no sd; "
        "identical systems when it is 0). `+/-/=`: "
        "queries where a configuration scores above / below / the same as the best "
        "(ablation: as the baseline)."
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
            *([ds["separated"], ""] if ds.get("separated") else []),
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
            f"## Power: MDE / queries needed for a {settings.get('target_delta', 0.05):g} "
            "difference",
            "",
            _power_line(settings, ds),
            "",
            markdown_table(["type", "n", *(_heading(m) for m in ds["metrics"])], power_rows(ds)),
            "",
        ]
        for reason_metric, reason in ds["skipped_metrics"].items():
            lines += [f"Skipped {reason_metric}: {reason}", ""]
        lines += tiers_section(ds, settings)
        lines += pareto_section(ds)
        for m in ds["metrics"]:
            lines += [
                f"## {_heading(m)}",
                "",
                markdown_table(
                    ["type", "n", *labels, "MDE / n", "best"], verdict_rows(ds, m["spec"])
                ),
                "",
                "Tests (best against each other configuration):",
                "",
                markdown_table(
                    [
                        "type",
                        "n",
                        "best",
                        "other",
                        "diff",
                        f"CI ({correction_name(settings)} level)",
                        "p",
                        f"p ({correction_name(settings)})",
                        "+/-/=",
                        "MDE / n",
                    ],
                    test_rows(ds, m["spec"], settings),
                ),
                "",
            ]
        for ab in ds.get("ablations") or []:
            base = ",".join(f"{k}={v}" for k, v in ab["baseline"].items())
            lines += [
                f"## Ablation against {base}",
                "",
                "Each cell: the setting's mean (its difference from the baseline; `*` = "
                f"significant after {correction_name(settings)} over "
                f"{settings.get('family_scope', 'each cell')} of this group; `+/-/=` its "
                "queries above / below / equal to the baseline; then MDE / n, as above).",
                "",
            ]
            for title, header, rows in ablation_tables(ab, ds["metrics"], ds["types"]):
                lines += [f"### {title}", ""]
                if rows:
                    lines += [markdown_table(header, rows), ""]
        if ds.get("robustness"):
            lines += robustness_markdown(ds["robustness"], ds["robustness"].get("heatmap"))
            if ds["robustness"]["missing"]:
                lines += ["Ran no variants: " + ", ".join(ds["robustness"]["missing"]), ""]
        lines += comparison_coverage_section(ds.get("coverage"))
        if ds.get("judge_estimates"):
            lines += estimates_section(ds["judge_estimates"])
        if ds.get("active_estimates"):
            lines += active_estimates_section(ds["active_estimates"])
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
            f"paired randomization test, {correction_name(settings)} over "
            f"{settings.get('family_scope', 'each cell')}, "
            f"alpha {settings['alpha']:g} ==",
            *([ds["separated"]] if ds.get("separated") else []),
        ]
        for m in ds["metrics"]:
            out += [
                "",
                _heading(m),
                text_table(["type", "n", *labels, "MDE / n", "best"], verdict_rows(ds, m["spec"])),
            ]
        out += tiers_terminal(ds)
        for ab in ds.get("ablations") or []:
            base = ",".join(f"{k}={v}" for k, v in ab["baseline"].items())
            out += [
                "",
                f"Ablation against {base} (value (diff), * = significant after "
                f"{correction_name(settings)})",
            ]
            for title, header, rows in ablation_tables(ab, ds["metrics"], ds["types"]):
                out += ["", title]
                if rows:
                    out.append(text_table(header, rows))
        if ds.get("judge_estimates"):
            out += ["", estimates_line(ds["judge_estimates"])]
        if ds.get("active_estimates"):
            out += ["", active_estimates_line(ds["active_estimates"])]
        if ds.get("robustness"):
            out += robustness_text(ds["robustness"])
    if files:
        out += ["", "comparison: " + ", ".join(str(f) for f in files)]
    return "\n".join(out) + "\n"
