"""The router's tables: its rules, the confusion matrix, and routed vs each single retriever per
labelled type. Every number comes from `metrics.json["router"]` (and the stages it copies)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

from retrieval_bench.reports.tables import fmt, markdown_table, text_table
from retrieval_bench.routing.metrics import ROUTED
from retrieval_bench.routing.rules import describe_when


def _delta(a: float | None, b: float | None) -> str:
    return "undef" if a is None or b is None else f"{a - b:+.3f}"


def _best(values: dict[str, float | None]) -> str:
    known = {name: v for name, v in values.items() if v is not None}
    if not known:
        return "undef"
    top = max(known.values())
    return " = ".join(name for name, v in known.items() if abs(v - top) < 1e-12)


def comparison_rows(router: dict[str, Any], metric: str, with_recall: bool) -> list[list[Any]]:
    """type, n, routing accuracy, metric per system, delta vs hybrid, best [, recall per system]."""
    cmp = router["comparison"]
    systems: list[str] = cmp["systems"]
    recall = cmp["metrics"][0]
    accuracy = router["accuracy"]["by_type"]
    rows = []
    for qtype, entry in [*cmp["by_type"].items(), ("all", cmp["overall"])]:
        acc = (
            router["accuracy"]["overall"]
            if qtype == "all"
            else accuracy.get(qtype, {}).get("accuracy")
        )
        values = {s: entry[s][metric] for s in systems}
        row = [qtype, entry["n"], acc, *values.values()]
        row.append(_delta(values[ROUTED], values.get("hybrid")) if "hybrid" in values else "-")
        row.append(_best(values))
        if with_recall:
            row += [entry[s][recall] for s in systems]
        rows.append(row)
    return rows


def comparison_header(router: dict[str, Any], metric: str, with_recall: bool) -> list[str]:
    systems = router["comparison"]["systems"]
    recall = router["comparison"]["metrics"][0]
    header = ["type", "n", "route acc", *(f"{metric} {s}" for s in systems)]
    header += ["Δ routed−hybrid", f"best {metric}"]
    if with_recall:
        header += [f"{recall} {s}" for s in systems]
    return header


def confusion_table(router: dict[str, Any]) -> str:
    routes: list[str] = list(router["serves"])
    confusion = router["confusion"]
    acc = router["accuracy"]
    rows = []
    for qtype, cells in confusion.items():
        by_type = acc["by_type"][qtype]
        rows.append([qtype, *(cells.get(r, 0) for r in routes), by_type["n"], by_type["accuracy"]])
    totals = [sum(confusion[t].get(r, 0) for t in confusion) for r in routes]
    rows.append(["all", *totals, acc["n"], acc["overall"]])
    precision = [acc["by_route"].get(r, {}).get("precision") for r in routes]
    rows.append(["precision", *precision, "", ""])
    return markdown_table(["labelled \\ routed", *routes, "n", "accuracy"], rows)


def rules_table(router: dict[str, Any]) -> str:
    routes = router["routes"]

    def describe(route: str) -> list[Any]:
        r = routes[route]
        return [route, r["strategy"], "+".join(r["arms"]), r["combine"], r["exclude"]]

    rows = [
        [i, describe_when(rule["when"]), *describe(rule["route"])]
        for i, rule in enumerate(router["rules"])
    ]
    rows.append(["-", "otherwise (default)", *describe(router["default_route"])])
    return markdown_table(["#", "when", "route", "strategy", "arms", "combine", "exclude"], rows)


def leak_rows(router: dict[str, Any], systems: Sequence[str]) -> list[list[Any]]:
    leak = router["negative_leak"]
    return [
        [s, leak[s]["rate"], ", ".join(leak[s]["queries"]) or "-"] for s in systems if s in leak
    ]


def _choices(choices: Sequence[str]) -> str:
    """The fold choices as `hybrid ×4, bm25 ×1` (most frequent first)."""
    return ", ".join(f"{name} ×{n}" for name, n in Counter(choices).most_common()) or "-"


def ceiling_rows(ceiling: dict[str, Any], metric: str) -> list[list[Any]]:
    """type, n, routed, best single, CV-fixed, oracle, captured, fold choices."""
    rows = []
    for qtype, entry in [*ceiling["by_type"].items(), ("all", ceiling["overall"])]:
        cell = entry[metric]
        rows.append(
            [
                qtype,
                entry["n"],
                cell["routed"],
                cell["best_single"],
                cell["cv_fixed"],
                cell["oracle"],
                cell["captured"],
                _choices(cell.get("cv_choices", [])) if qtype != "all" else "per type",
            ]
        )
    return rows


def ceiling_notes(ceiling: dict[str, Any]) -> list[str]:
    """One line per undefined share or CV value and per type with fewer queries than folds."""
    notes = []
    for qtype, entry in [*ceiling["by_type"].items(), ("all", ceiling["overall"])]:
        if entry["n"] == 0:
            notes.append(f"- {qtype}: no scored queries, every value undefined.")
            continue
        if entry.get("note"):
            notes.append(f"- {qtype}: {entry['note']}.")
        reasons: dict[str, list[str]] = {}
        for metric in ceiling["metrics"]:
            for key, reason in entry[metric]["undefined"].items():
                if key in ("captured", "cv_fixed"):
                    reasons.setdefault(f"{key} undefined: {reason}", []).append(metric)
        notes += [f"- {qtype}, {', '.join(ms)}: {why}." for why, ms in reasons.items()]
    return notes


def ceiling_section(ceiling: dict[str, Any]) -> list[str]:
    """report.md lines: what each ceiling number means, then one table per headline metric."""
    lines = [
        "### The routing ceiling: how much could routing gain?",
        "",
        f"On the same scored queries as `{ROUTED}`: `oracle` takes, per query, the best value any "
        f"strategy run on it reached ({ROUTED} and each of "
        + ", ".join(f"`{c}`" for c in ceiling["candidates"])
        + "), averaged: what a router that always chose right could reach. `best single` is the "
        "one baseline with the best overall mean (per metric: "
        + ", ".join(f"{m} `{name}`" for m, name in ceiling["best_single"].items())
        + f"). `CV-fixed` sends each labelled type to one baseline chosen by {ceiling['folds']}-"
        f"fold cross-validation over queries (stratified by type, seed {ceiling['seed']}): "
        "chosen on the other folds, scored on the held-out one, so it never sees the queries it "
        "is scored on (it does know each query's labelled type, which a router has to infer); "
        "`fold choices` lists what each fold chose. `captured` = (routed − best single) / "
        "(oracle − best single): the share of the possible gain over the best single strategy "
        "that the router realised (1 = the oracle, 0 = no better than the best single, negative "
        "= worse). Details: `router.ceiling` in metrics.json.",
        "",
    ]
    header = ["type", "n", "routed", "best single", "CV-fixed", "oracle", "captured"]
    for metric in ceiling["metrics"]:
        lines += [
            f"**{metric}**",
            "",
            markdown_table([*header, "fold choices"], ceiling_rows(ceiling, metric)),
            "",
        ]
    notes = ceiling_notes(ceiling)
    return [*lines, *notes, *([""] if notes else [])]


def _setting(key: str, value: Any) -> str:
    shown = value if isinstance(value, (int, float, str)) else json.dumps(value, ensure_ascii=False)
    return f"`{key}`={shown}"


def settings_lines(settings: dict[str, Any]) -> list[str]:
    """Which router settings were chosen on this evaluation set, and which are unvalidated."""
    tuned = settings["tuned_on_evalset"]
    untuned = {k: v for k, v in settings["thresholds"].items() if k not in tuned}
    lines = []
    if tuned:
        lines.append(
            "These settings were chosen on this evaluation set: "
            + ", ".join(_setting(k, v) for k, v in tuned.items())
            + "; the numbers for the rules router are optimistic (fitted on the queries they "
            "are scored on)."
        )
    if untuned:
        lines.append(
            "Thresholds in use, not declared tuned on this evaluation set "
            "(`router.tuned_on_evalset`) and not validated on held-out data: "
            + ", ".join(_setting(k, v) for k, v in untuned.items())
            + "."
        )
    return [*lines, ""]


def router_section(router: dict[str, Any], k: int) -> list[str]:
    """report.md lines for a routed job."""
    counts = router["counts"]
    acc = router["accuracy"]
    metric = f"ndcg@{k}"
    systems = router["comparison"]["systems"]
    exclusions = router["exclusions"]
    leak = router["negative_leak"]
    return [
        "## Router",
        "",
        f"Rules from `{router['source']}`, tested in order; the first that holds picks the "
        "route. A route serves the labelled types listed in `serves` (metrics.json); the "
        "default route also serves every type no other route serves.",
        "",
        rules_table(router),
        "",
        f"Routing accuracy {fmt(acc['overall'])} ({acc['correct']}/{acc['n']} queries routed to "
        f"a route that serves their labelled type). Default route taken by {counts['default']} "
        f"queries, {counts['default_no_signal']} of them with no entity and no negation cue.",
        "",
        "### Confusion matrix (rows: labelled `query_type`, columns: routed)",
        "",
        confusion_table(router),
        "",
        f"### Did routing help? Routed vs each single retriever, top {k}",
        "",
        f"`{ROUTED}` is this job's `final` stage. "
        + ", ".join(f"`{s}`" for s in systems if s != ROUTED)
        + " are each single retriever run in this same job on every query, filtered as a job "
        "without a router filters (cities, permissions; no exclusions) and cut to top_k "
        "(`baselines` in rankings.jsonl and metrics.json, `trec/baselines/`). Rows are labelled "
        "types; n = scored queries; `route acc` counts every query of the type, scored or not.",
        "",
        markdown_table(
            comparison_header(router, metric, True), comparison_rows(router, metric, True)
        ),
        "",
        *settings_lines(router["settings"]),
        *ceiling_section(router["ceiling"]),
        "### Exclusions",
        "",
        f"{exclusions['queries']} queries had their parsed excluded entities filtered out before "
        f"ranking; passages of an excluded entity found in any of their stages: "
        f"{len(exclusions['violations'])}.",
        "",
        f"Queries with labelled `negative_entities` ({leak['n']}): share whose top {k} holds a "
        "passage about a negative entity.",
        "",
        markdown_table(["system", f"leak@{k}", "queries"], leak_rows(router, systems)),
        "",
    ]


def router_summary(router: dict[str, Any], k: int) -> str:
    """Terminal lines: accuracy, default count, and the per-type ndcg comparison."""
    acc = router["accuracy"]
    counts = router["counts"]
    metric = f"ndcg@{k}"
    table = text_table(
        comparison_header(router, metric, False), comparison_rows(router, metric, False)
    )
    overall = router["ceiling"]["overall"][metric]
    best = router["ceiling"]["best_single"][metric]
    ceiling = (
        f"ceiling {metric}: routed {fmt(overall['routed'])}, best single {best} "
        f"{fmt(overall['best_single'])}, CV-fixed per type {fmt(overall['cv_fixed'])}, oracle "
        f"{fmt(overall['oracle'])}, captured {fmt(overall['captured'])}"
    )
    return (
        f"router: accuracy {fmt(acc['overall'])} ({acc['correct']}/{acc['n']}); default route "
        f"{counts['default']} ({counts['default_no_signal']} with no entity and no cue); "
        f"exclusion violations {len(router['exclusions']['violations'])}\n{table}\n"
        f"{ceiling}\n"
    )
