"""comparison.md's section on labels a model judge gave: the three estimates side by side
(people's labels, people's plus the judge's, prediction-powered), the cells whose verdict
changes between them, and how much of each ranking rests on the judge (`judge.estimates`
builds the record)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from retrieval_bench.reports.tables import markdown_table

ESTIMATE_NAMES = {"people": "people", "people+judge": "people + judge", "ppi": "PPI"}


def _used(entry: Mapping[str, Any]) -> str:
    """` n=28+81`: a PPI figure's labelled and predicted queries ('' for the others)."""
    return f" n={entry['n']}+{entry['n_predicted']}" if entry.get("n_predicted") else ""


def _interval(entry: Mapping[str, Any]) -> str:
    if "mean" not in entry:
        return "—"
    return f"{entry['mean']:.3f} [{entry['ci_low']:.3f}, {entry['ci_high']:.3f}]{_used(entry)}"


def _difference(entry: Mapping[str, Any]) -> str:
    if "mean" not in entry:
        return "—"
    return (
        f"{entry['mean']:+.3f} [{entry['ci_low']:+.3f}, {entry['ci_high']:+.3f}]{_used(entry)} "
        f"{entry['verdict']}"
    )


def _notes(cells: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each distinct reason an estimate was not made, once."""
    found: dict[str, None] = {}
    for cell in cells:
        for name in ESTIMATE_NAMES:
            note = (cell.get(name) or {}).get("note")
            if note:
                found.setdefault(f"{ESTIMATE_NAMES[name]}: {note}", None)
    return list(found)


def estimates_section(record: Mapping[str, Any], heading: str = "##") -> list[str]:
    """The section's markdown lines."""
    estimates = list(ESTIMATE_NAMES.values())
    lines = [
        f"{heading} Estimates with the judge's labels",
        "",
        f"Labels: `{record['labels']}`, judge {', '.join(record['judge_sources'])}. Each cell: "
        "mean [interval] under people's labels only, people's plus the judge's, and the "
        "prediction-powered estimate over the same queries as people's beside it: the "
        "judge's labels, corrected by their error on the n of those queries whose top-K "
        "passages people labelled and the judge graded, and alone on the N others "
        "(`n=n+N`; "
        f"{record['labelled_queries']} of the set's {record['queries']} queries are labelled "
        "so; valid when those are a random sample of the queries). Normal intervals for all "
        "three, variances with ddof 1; differences corrected as the tests above, each at its "
        "correction level; the verdict names the better configuration, or `tie`. "
        "⚑: the verdict changes between the estimates.",
        "",
    ]
    changed = record["changed"]
    if changed:
        lines += [f"Verdicts that change ({len(changed)}):", ""]
        for c in changed:
            verdicts = ", ".join(f"{ESTIMATE_NAMES[n]} {v}" for n, v in c["verdicts"].items())
            lines.append(f"- {c['metric']}, {c['type']}: {c['a']} vs {c['b']}: {verdicts}")
        lines.append("")
    else:
        lines += ["No verdict changes between the estimates.", ""]
    for entry in record["metrics"]:
        means_rows, diff_rows, cells, empty = [], [], [], []
        for t, cell in entry["types"].items():
            shown = False
            kept: list[Mapping[str, Any]] = []
            for label, means in cell["means"].items():
                values = [_interval(means[n]) for n in ESTIMATE_NAMES]
                kept.append(means)
                if any(v != "—" for v in values):
                    means_rows.append([t, label, *values])
                    shown = True
            for diff in cell["differences"]:
                values = [_difference(diff[n]) for n in ESTIMATE_NAMES]
                kept.append(diff)
                if any(v != "—" for v in values):
                    flag = "⚑" if diff["changed"] else ""
                    diff_rows.append([t, f"{diff['a']} − {diff['b']}", *values, flag])
                    shown = True
            if shown:  # a type without any estimate is named once, its reasons not repeated
                cells += kept
            else:
                empty.append(t)
        lines += [
            f"{heading}# {entry['spec']}: three estimates",
            "",
            markdown_table(["type", "configuration", *estimates], means_rows),
            "",
        ]
        if diff_rows:
            lines += [
                markdown_table(["type", "difference", *estimates, ""], diff_rows),
                "",
            ]
        notes = _notes(cells)
        if empty:
            notes.insert(0, f"no estimate at all (too few queries): {', '.join(empty)}")
        lines += [f"- {note}" for note in notes]
        lines += [""] if notes else []
    lines += [
        f"{heading}# How much of each ranking rests on the judge",
        "",
        "Mean share of the top K labelled (judged@K), by people, and by the judge.",
        "",
    ]
    rows = []
    for label, by_type in record["judged"].items():
        for t, shares in by_type.items():
            rows.append(
                [
                    t,
                    label,
                    shares["n"],
                    f"{shares['judged']:.3f}",
                    f"{shares['by_people']:.3f}",
                    f"{shares['by_judge']:.3f}",
                ]
            )
    lines += [
        markdown_table(["type", "configuration", "n", "judged@K", "people", "judge"], rows),
        "",
    ]
    return lines


def estimates_line(record: Mapping[str, Any]) -> str:
    """The terminal's one line about the estimates."""
    changed = record["changed"]
    if not changed:
        return "judge estimates: no verdict changes between people, people + judge and PPI"
    cells = "; ".join(f"{c['metric']} {c['type']} {c['a']} vs {c['b']}" for c in changed[:3])
    more = f" (+{len(changed) - 3} more)" if len(changed) > 3 else ""
    return f"judge estimates: {len(changed)} verdicts change between the estimates: {cells}{more}"
