"""report.md sections for the metric families, refusal, evidence curves and group-by fields.

Every number comes from metrics.json (`stages.<stage>.families.<family>`, `refusal`); each
table says how many queries it scored and which were excluded, with their reasons.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from retrieval_bench.reports.plots import EVIDENCE, PER_TYPE, REFUSAL
from retrieval_bench.reports.tables import (
    excluded_text,
    exclusions_line,
    fmt,
    markdown_table,
    paragraphs,
    per_type_rows,
    per_type_table,
    trim_empty,
)

FAMILY_NOTES = {
    "readable": "the doc metrics over the relevant passages the asking role may read; a query "
    "whose relevant passages are all unreadable (`no_readable_relevant`) belongs to refusal",
    "leak": "share of the top K the asking role may not read: `leak` = mean of leaked/K, "
    "`leak_pooled` = sum leaked / sum shown, `leak_any` = share of queries with any leak; "
    "every query with a user_role is scored, whatever its label status",
    "entities": "expected entities (those some readable passage names) found among the "
    "entities of the top K passages; `unexpected_entity_rate` = share of the entities shown "
    "that were not expected",
    "negative_entities": "share of the entities a query excluded that still appear in the top K",
    "evidence": "hop chains: `evidence_chain` = every hop served by one of its ids, "
    "`evidence_all` = every evidence id present, `evidence_any` = any one present; a query "
    "without `hops` is a 1-hop chain over its relevant ids",
}


def columns_at(group: Mapping[str, Any], k: int) -> list[str]:
    """The metric keys of a family's group dict at cut-off k, in the family's order."""
    return [name for name in group if name.endswith(f"@{k}")]


def _family(stage: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    return (stage.get("families") or {}).get(name)


def headline_section(metrics: Mapping[str, Any], k: int, plots: Mapping[str, str]) -> list[str]:
    """The final stage per type, one column block per family, each with its own n.

    Only blocks, types and columns that hold data are shown: a family that scored no query
    (`leak` without user roles), `readable` when it equals `doc` on every row (nothing is
    unreadable), a type no block scored (`no_answer`); the lines under the table say which."""
    final = metrics["stages"].get("final")
    if not final or "families" not in final:
        return []
    doc_names = [f"recall@{k}", f"hit@{k}", f"ndcg@{k}"]
    blocks: list[tuple[str, Mapping[str, Any], list[str]]] = [("doc", final, doc_names)]
    left_out = []
    for family, names in (
        ("readable", [f"readable_{name}" for name in doc_names]),
        ("evidence", [f"evidence_chain@{k}"]),
        ("entities", [f"entity_recall@{k}"]),
        ("leak", [f"leak@{k}", f"leak_any@{k}"]),
    ):
        result = _family(final, family)
        if result is None:
            continue
        if not result["overall"].get("n"):
            left_out.append(f"{family} (no scored queries)")
        elif family == "readable" and _same_rows(result, names, final, doc_names):
            left_out.append("readable (equal to doc on every row)")
        else:
            blocks.append((family, result, names))
    header = ["type"]
    for family, _, names in blocks:
        header += [f"n {family}", *names]
    types = sorted({t for _, result, _ in blocks for t in result.get("by_type", {})})
    rows = []
    for qtype in [*types, None]:
        row: list[Any] = [qtype or "all"]
        for _, result, names in blocks:
            group = result["overall"] if qtype is None else result["by_type"].get(qtype, {})
            row += [group.get("n", 0), *(group.get(name) for name in names)]
        rows.append(row)
    counts = [i for i, name in enumerate(header) if name.startswith("n ")]
    header, rows, notes = trim_empty(header, rows, counts, final.get("counts"))
    if left_out:
        notes.insert(0, "blocks left out: " + ", ".join(left_out))
    lines = paragraphs(
        f"## Headline: stage `final`, top {k}",
        "Each block has its own `n` (queries it scored). `recall` counts every labelled "
        "relevant passage, including ones the asking role may not read: a permission-respecting "
        "pipeline scores 0 on the `permission` queries there by design. `readable_recall` "
        "counts only what the role may read and leaves those queries to refusal and leak, so "
        "it is the headline for a pipeline with the permission filter on. `undef` = nothing "
        "scorable (see the exclusions below).",
        markdown_table(header, rows),
        *notes,
    )
    for family in ("doc", "readable", "evidence", "entities", "leak"):
        result = final if family == "doc" else _family(final, family)
        if result is not None:
            lines.append(f"- {family}: {exclusions_line(result)}")
    lines.append("")
    if PER_TYPE in plots:
        lines += [f"![per-type metrics, final stage]({plots[PER_TYPE]})", ""]
    return lines


def _same_rows(
    result: Mapping[str, Any], names: list[str], base: Mapping[str, Any], base_names: list[str]
) -> bool:
    """True when `result`'s columns equal `base`'s, n included, overall and for every type."""

    def cells(r: Mapping[str, Any], columns: list[str]) -> list[list[Any]]:
        return per_type_rows({**r, "by_type": dict(sorted(r["by_type"].items()))}, columns)

    return cells(result, names) == cells(base, base_names)


def refusal_section(refusal: Mapping[str, Any] | None, plots: Mapping[str, str]) -> list[str]:
    if not refusal:
        return []
    counts = refusal["counts"]
    refuse = counts.get("should_refuse", {})
    refuse_text = ", ".join(f"{reason} {n}" for reason, n in refuse.items()) or "none"
    excluded = ", ".join(f"{r} {n}" for r, n in counts.get("excluded", {}).items()) or "none"
    stage = refusal["stage"]
    lines = [
        f"## Refusal (top score of stage `{stage}`)",
        "",
        f"Rule: {refusal['rule']}. The score is stage `{stage}`'s own: "
        + (
            "an RRF sum of 1/(k + rank), which measures agreement between arms, not match quality. "
            if stage in ("final", "fused")
            else "comparable only within this arm. "
        )
        + "Choose it with `refusal.score_stage`.",
        "",
        f"Scored {counts['scored']}: should answer {counts['should_answer']}, should refuse "
        f"{sum(refuse.values())} ({refuse_text}); excluded: {excluded}.",
        "",
    ]
    table = refusal["table"]
    columns = list(
        zip(
            table["threshold"],
            table["answered"],
            table["answered_rate"] or [None] * len(table["threshold"]),
            table["refused"],
            table["refused_rate"] or [None] * len(table["threshold"]),
            strict=True,
        )
    )
    rows = [[f"{t:.4f}", a, ar, r, rr] for t, a, ar, r, rr in columns]
    lines += [
        markdown_table(["threshold", "answered", "answered_rate", "refused", "refused_rate"], rows),
        "",
    ]
    balanced = refusal["balanced"]
    if balanced.get("threshold") is None:
        lines += [f"Balanced threshold: undefined ({balanced.get('undefined')}).", ""]
    else:
        lines += [
            f"Balanced threshold **{balanced['threshold']:.4f}** ({balanced['criterion']}; "
            "fitted on this evaluation set): answered_rate "
            f"{fmt(balanced['answered_rate'])}, refused_rate {fmt(balanced['refused_rate'])}, "
            f"mean {fmt(balanced['balanced_accuracy'])}. Best mean instead: t="
            f"{balanced['best_mean']['threshold']:.4f} (answered_rate "
            f"{fmt(balanced['best_mean']['answered_rate'])}, refused_rate "
            f"{fmt(balanced['best_mean']['refused_rate'])}).",
            "",
        ]
        by_type = refusal.get("at_balanced_by_type", {})
        if by_type:
            by_type_rows = [
                [t, v["n"], "/".join(v["should"]), v["correct_rate"]] for t, v in by_type.items()
            ]
            lines += [
                markdown_table(["type", "n", "should", "correct at balanced t"], by_type_rows),
                "",
            ]
    if REFUSAL in plots:
        lines += [f"![refusal curve]({plots[REFUSAL]})", ""]
    return lines


def evidence_section(metrics: Mapping[str, Any], plots: Mapping[str, str]) -> list[str]:
    final = metrics["stages"].get("final", {})
    evidence = _family(final, "evidence")
    curves = (evidence or {}).get("curves") or {}
    if not curves.get("by_hops"):
        return []
    ks = curves["k"]
    lines = [
        "## Evidence chains by hop count (stage `final`)",
        "",
        "Share of chains complete within the top k (`evidence_chain@k`); in brackets the mean "
        "share of hops served (`hop_recall@k`).",
        "",
    ]
    rows = []
    for hops, curve in sorted(curves["by_hops"].items(), key=lambda item: int(item[0])):
        cells = [
            f"{c:.3f} ({h:.3f})"
            for c, h in zip(curve["evidence_chain"], curve["hop_recall"], strict=True)
        ]
        rows.append([f"{hops}-hop", curve["n"], *cells])
    lines += [markdown_table(["chain", "n", *(f"k={k}" for k in ks)], rows), ""]
    if EVIDENCE in plots:
        lines += [f"![evidence completeness]({plots[EVIDENCE]})", ""]
    return lines


def family_tables(stage: Mapping[str, Any], cutoffs: Sequence[int]) -> list[str]:
    """One per-type table per family and cut-off, for one stage (only what holds data)."""
    lines: list[str] = []
    for name, result in (stage.get("families") or {}).items():
        lines += [f"### `{name}`: {FAMILY_NOTES.get(name, '')}", "", exclusions_line(result), ""]
        for k in cutoffs:
            table = per_type_table(result, columns_at(result["overall"], k), markdown_table)
            lines += paragraphs(f"@{k}", *table) if table else []
    return lines


def group_by_section(metrics: Mapping[str, Any], k: int) -> list[str]:
    """Final-stage tables for each configured group-by field (doc, readable and leak)."""
    final = metrics["stages"].get("final", {})
    fields = [key for key in final if key.startswith("by_") and key != "by_type"]
    lines: list[str] = []
    for key in fields:
        lines += [f"## Stage `final` by `{key[3:]}`", ""]
        blocks = [("doc", final, [f"recall@{k}", f"hit@{k}", f"ndcg@{k}"])]
        for family, names in (
            ("readable", [f"readable_recall@{k}"]),
            ("leak", [f"leak_any@{k}"]),
        ):
            result = _family(final, family)
            if result is not None and key in result:
                blocks.append((family, result, names))
        header = [key[3:]]
        for family, _, names in blocks:
            header += [f"n {family}", *names]
        rows = []
        for value in final[key]:
            row: list[Any] = [value]
            for _, result, names in blocks:
                group = result[key].get(value, {})
                row += [group.get("n", 0), *(group.get(name) for name in names)]
            rows.append(row)
        counts = [i for i, name in enumerate(header) if name.startswith("n ")]
        header, rows, notes = trim_empty(
            header, rows, counts, row_kind=f"`{key[3:]}` values", total_row=False
        )
        lines += paragraphs(markdown_table(header, rows), *notes)
    return lines


def console_lines(metrics: Mapping[str, Any], k: int) -> str:
    """A few lines for the terminal: readable recall, leak, evidence by hops, refusal."""
    final = metrics["stages"].get("final", {})
    out = []
    readable = _family(final, "readable")
    leak = _family(final, "leak")
    # Only datasets with roles and ACLs have something to say about permissions.
    if readable is not None and leak is not None and leak["overall"].get("n"):
        r, lk = readable["overall"], leak["overall"]
        out.append(
            f"readable_recall@{k} {fmt(r.get(f'readable_recall@{k}'))} (n {r['n']}; "
            f"{excluded_text(readable)}); "
            f"leak@{k} {fmt(lk.get(f'leak@{k}'))}, leak_any@{k} {fmt(lk.get(f'leak_any@{k}'))} "
            f"(n {lk['n']})"
        )
    evidence = _family(final, "evidence")
    hops = (evidence or {}).get("by_hops", {})
    if evidence is not None and any(g["n"] for h, g in hops.items() if str(h) != "1"):
        parts = [
            f"{h}-hop {fmt(g.get(f'evidence_chain@{k}'))} (n {g['n']})"
            for h, g in hops.items()
            if g["n"]
        ]
        out.append(f"evidence_chain@{k}: " + ", ".join(parts))
    refusal = metrics.get("refusal")
    if refusal:
        b = refusal["balanced"]
        counts = refusal["counts"]
        head = f"refusal on stage '{refusal['stage']}' top score: "
        if b.get("threshold") is None:
            out.append(head + f"undefined ({b.get('undefined')})")
        else:
            out.append(
                head + f"balanced t={b['threshold']:.4f}, answered {fmt(b['answered_rate'])} of "
                f"{counts['should_answer']} answerable, refused {fmt(b['refused_rate'])} of "
                f"{sum(counts['should_refuse'].values())} unanswerable"
            )
    return "".join(line + "\n" for line in out)
